#!/bin/sh
# Installs what lockcheck needs, and only what is missing: safe to run before every command.
set -eu
cd "$(dirname "$0")/.."

# Node 20.19 or newer, 22.12 or newer past 20 (package.json's engines: vitest's vite needs them, and the CLI's
# AbortSignal.any and tsx's module hooks are not in early 20s): an older one fails later, in a dependency, with a message that does not say why.
NODE_NEEDED="Node 20.19 or newer (22.12 or newer past 20)"
node_version=$(node -p process.versions.node 2>/dev/null) || node_version=""
case "$node_version" in
  "") echo "lockcheck setup: node is not on the PATH; lockcheck needs $NODE_NEEDED (https://nodejs.org)" >&2; exit 1 ;;
esac
node_major=${node_version%%.*}
node_minor=${node_version#*.}
node_minor=${node_minor%%.*}
if [ "$node_major" -lt 20 ] || { [ "$node_major" -eq 20 ] && [ "$node_minor" -lt 19 ]; } || [ "$node_major" -eq 21 ] || { [ "$node_major" -eq 22 ] && [ "$node_minor" -lt 12 ]; }; then
  echo "lockcheck setup: lockcheck needs $NODE_NEEDED; this node is $node_version" >&2
  exit 1
fi

# npm packages: install when node_modules is missing or older than the lock file (in a clone of
# the repository; an installed package has no lock file, and its project installed its packages).
if [ -f package-lock.json ] && { [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; }; then
  echo "lockcheck setup: installing npm packages (npm ci)" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
fi

# tsx's cache of compiled code (<temp dir>/tsx-<uid>, a name any local user can make first) is code the commands after
# this one run: made 0700 here, and one of another user's, or writable by others, stops them
# (conformance/env/tsxCache.mjs; in a clone: the package's bin runs compiled JavaScript, and its tsx guards itself).
if [ -f conformance/env/tsxCache.mjs ]; then node conformance/env/tsxCache.mjs; fi

# Debian packages for the real-server conformance layer: redis-server, redis-sentinel, libfaketime and
# postgresql (PostgreSQL 15; its package postgresql-15 also ships pgbench); and
# chromium, the headless browser the HTML report test drives through playwright-core
# (playwright never downloads a browser of its own here); gcc and libc6-dev for the shim; etcd-server; zookeeper.
# Skipped entirely when all are already present; never leaves a service running.
# Debian's multiarch directory (x86_64-linux-gnu, aarch64-linux-gnu): uname -m names the first part, as conformance/env/faketime.ts's multiarchOf does.
LIBFAKETIME=/usr/lib/$(uname -m)-linux-gnu/faketime/libfaketime.so.1
PG_BIN=/usr/lib/postgresql/15/bin
# The packages whose files are absent, as " a b c" (empty when all are present).
missing_packages() {
  missing=""
  command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
  # Sentinel, for the redis-replicated backend's failover (its service is never started: policy-rc.d or none).
  command -v redis-sentinel >/dev/null 2>&1 || missing="$missing redis-sentinel"
  [ -f "$LIBFAKETIME" ] || missing="$missing libfaketime"
  [ -x "$PG_BIN/postgres" ] && [ -x "$PG_BIN/pgbench" ] || missing="$missing postgresql"
  [ -x /usr/bin/chromium ] || missing="$missing chromium"
  # gcc and the C headers build the small malloc shim that runs beside libfaketime.
  command -v gcc >/dev/null 2>&1 || missing="$missing gcc"
  [ -f /usr/include/stdio.h ] || missing="$missing libc6-dev"
  # etcd (3.4, Debian's etcd-server) for the etcd backend's 3-member clusters (its service is never started: policy-rc.d or none).
  command -v etcd >/dev/null 2>&1 || missing="$missing etcd-server"
  # openssl signs the per-run certificates the etcd clusters require of every client and peer.
  command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
  # ZooKeeper (3.8, Debian's zookeeper: the jars only, no service) for the zookeeper backend's 3-member ensembles; it runs on the installed Java.
  [ -f /usr/share/java/zookeeper.jar ] || missing="$missing zookeeper"
  echo "$missing"
}
missing=$(missing_packages)
if [ -n "$missing" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "lockcheck setup: missing Debian packages:$missing" >&2
    echo "lockcheck setup: run as root: apt-get update && apt-get install -y --no-install-recommends$missing" >&2
    exit 1
  fi
  echo "lockcheck setup: installing Debian packages:$missing (apt-get update, apt-get install)" >&2
  export DEBIAN_FRONTEND=noninteractive
  # apt's own messages come first; the last line says what lockcheck could not get.
  apt-get update >&2 || { echo "lockcheck setup: apt-get update failed (above); not installed:$missing" >&2; exit 1; }
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  apt-get install -y --no-install-recommends $missing >&2 || { echo "lockcheck setup: apt-get install failed (above); not installed:$missing" >&2; exit 1; }
  # postgresql-15's postinst creates a default cluster (15/main) and runs
  # `invoke-rc.d postgresql start`; that starts it unless a policy-rc.d forbids
  # it. The project starts its own throwaway clusters: stop any that came up.
  case "$missing" in
    *postgresql*)
      if command -v pg_lsclusters >/dev/null 2>&1; then
        pg_lsclusters --no-header 2>/dev/null | while read -r version cluster _port status _rest; do
          case "$status" in
            online*)
              echo "lockcheck setup: stopping the cluster $version/$cluster that the package install started" >&2
              pg_ctlcluster "$version" "$cluster" stop -m fast >&2 || pg_ctlcluster "$version" "$cluster" stop -m immediate >&2 || true
              ;;
          esac
        done
      fi
      ;;
  esac
  # A distribution whose packages put the files elsewhere (not Debian 12: another PostgreSQL than 15, a chromium
  # that is a snap) installs without error and leaves lockcheck without them: say so here, not in a later run.
  still=$(missing_packages)
  if [ -n "$still" ]; then
    echo "lockcheck setup: apt-get installed, but still missing:$still (lockcheck looks for Debian 12's files: docs/getting-started.md#install)" >&2
    exit 1
  fi
fi
