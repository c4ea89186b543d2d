#!/usr/bin/env bash
# Installs the bench's peers in folders of their own (never in the root package.json):
#   bench/peers/          plainjob 0.0.14, BullMQ 6.7.0 (+ ioredis); plainjob uses the root's better-sqlite3
#   bench/peers/liteque/  liteque 0.8.0 with better-sqlite3 11.9.1 (built from source by node-gyp)
# Run by `npm run bench -- --peers` when a folder has no node_modules; safe to run again.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for dir in "$here" "$here/liteque"; do
  echo "bench/peers/install.sh: npm install in ${dir#"$here"/}" >&2
  if [ -f "$dir/package-lock.json" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  else
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error)
  fi
done
