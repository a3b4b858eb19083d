#!/bin/sh
# Installs what lockcheck needs, and only what is missing: safe to run before every command.
set -eu
cd "$(dirname "$0")/.."

# npm packages: install when node_modules is missing or older than the lock file.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "lockcheck setup: installing npm packages (npm ci)" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
fi

# Debian packages for the real-server conformance layer: redis-server and libfaketime.
# Skipped entirely when both are already present; never starts a service.
LIBFAKETIME=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
missing=""
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
[ -f "$LIBFAKETIME" ] || missing="$missing libfaketime"
if [ -n "$missing" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "lockcheck setup: missing Debian packages:$missing" >&2
    echo "lockcheck setup: run as root: apt-get update && apt-get install -y --no-install-recommends$missing" >&2
    exit 1
  fi
  echo "lockcheck setup: installing Debian packages:$missing (apt-get update, apt-get install)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >&2
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  apt-get install -y --no-install-recommends $missing >&2
fi
