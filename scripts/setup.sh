#!/bin/sh
# Installs what lockcheck needs, and only what is missing: safe to run before every command.
set -eu
cd "$(dirname "$0")/.."

# npm packages: install when node_modules is missing or older than the lock file.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "lockcheck setup: installing npm packages (npm ci)" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
