#!/usr/bin/env bash
# The packed package works for a user: pack it (prepack builds dist/), check what the tarball
# ships, install it into a fresh project next to the pinned effect packages, compile the README's
# Example there with a strict NodeNext tsconfig and run it with node, import each entry point
# (`fair-relay/sqlite`, …) the same way, check it is ESM-only from CommonJS (require refused,
# import() works), then run the `fair-relay` bin (`--help`, and `status` on
# the store the Example wrote) — with no tsx installed.
#
# The repository is copied first (tracked and new files, node_modules linked) so that the build
# never leaves a dist/ in a shared working tree. Needs the npm registry (or a warm npm cache).
# Usage: bash test/package/pack-check.sh   (or npm run pack:check). KEEP=1 keeps the temp dir.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/fair-relay-pack-XXXXXX")
cleanup() { if [ "${KEEP:-}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi; }
trap cleanup EXIT
fail() { echo "pack-check FAILED: $*" >&2; exit 1; }
step() { echo "-- $*"; }

step "copy of the repository in $work/repo"
mkdir -p "$work/repo"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$work/repo"
ln -s "$repo/node_modules" "$work/repo/node_modules"

step "npm pack (prepack: npm run build)"
(cd "$work/repo" && npm pack --silent --pack-destination "$work" >"$work/pack.out")
tarball="$work/$(tail -1 "$work/pack.out")"
[ -f "$tarball" ] || fail "npm pack made no tarball"
tar -tzf "$tarball" | sort >"$work/contents"
echo "   $(wc -l <"$work/contents") files, $(du -k "$tarball" | cut -f1) KiB packed"
for required in package/package.json package/README.md package/bin/fair-relay.mjs \
  package/dist/index.js package/dist/index.d.ts package/dist/cli/fair-relay.mjs; do
  grep -qx "$required" "$work/contents" || fail "the tarball lacks $required"
done
if grep -vE '^package/(package\.json|README\.md|LICENSE|bin/fair-relay\.mjs|dist/.*)$' "$work/contents"; then
  fail "the tarball ships files users do not need (above)"
fi

step "fresh consumer project with the pinned effect packages"
pin() { node -p "require('$repo/package.json').devDependencies['$1']"; }
mkdir -p "$work/consumer"
cd "$work/consumer"
# npm 11 runs no dependency install script unless allowed: better-sqlite3 gets its addon in one.
echo '{ "name": "consumer", "private": true, "type": "module", "allowScripts": { "better-sqlite3": true } }' >package.json
npm install --no-audit --no-fund --loglevel=error "$tarball" \
  "effect@$(pin effect)" "@effect/platform@$(pin @effect/platform)" \
  "@effect/platform-node@$(pin @effect/platform-node)" "@effect/sql@$(pin @effect/sql)" \
  "@effect/experimental@$(pin @effect/experimental)" \
  "typescript@$(pin typescript)" "@types/node@$(pin @types/node)"

copies=$(npm ls effect --all --parseable | sort -u | wc -l)
[ "$copies" = 1 ] || { npm ls effect --all; fail "$copies copies of effect installed (peer dependency not shared)"; }
[ ! -e node_modules/tsx ] || fail "tsx was installed (the bin must not need it)"
[ ! -e node_modules/@effect/cli ] || fail "@effect/cli was installed (the bin is bundled)"
for pkg in @effect/cluster @effect/rpc @effect/workflow; do
  if [ -e "node_modules/$pkg" ]; then
    echo "   note: $pkg installed as a peer of: $(npm explain "$pkg" 2>/dev/null | grep -oE 'from [^ ]+' | cut -c6- | sort -u | tr '\n' ' ')"
  fi
done

step "the README's Example, typechecked strictly and run compiled"
awk '/^#+ Example$/ { inside = 1 } inside && /^```ts/ { code = 1; next } code && /^```/ { exit } code' \
  "$repo/README.md" >example.ts
[ -s example.ts ] || fail "no \`\`\`ts block under the heading 'Example' in README.md"
cat >tsconfig.json <<'EOF'
{
  "compilerOptions": {
    "strict": true,
    "exactOptionalPropertyTypes": true,
    "noUncheckedIndexedAccess": true,
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "target": "es2022",
    "lib": ["es2022"],
    "types": ["node"],
    "skipLibCheck": false,
    "outDir": "out"
  },
  "files": ["example.ts"]
}
EOF
npx tsc -p tsconfig.json || fail "the README's Example does not typecheck against the packed types"
node out/example.js >example.out || fail "the README's Example failed"
cat example.out
[ "$(grep -c "_tag: 'Acked'" example.out)" = 2 ] || fail "the Example did not ack its two events"

step "the entry points: each subpath typechecks and loads, the same values as the main entry's"
cat >entries.ts <<'EOF'
import * as All from "fair-relay"
import { Relay, RelayQueue } from "fair-relay/core"
import { Dashboard } from "fair-relay/dashboard"
import { HttpInbox, HttpTransport } from "fair-relay/http"
import { PgInbox, PgRelayQueue, Relay as PgRelay } from "fair-relay/postgres"
import { MemoryRelayQueue, SqliteInbox, SqliteRelayQueue, Relay as SqliteRelay } from "fair-relay/sqlite"
const same: Record<string, boolean> = {
  core: All.Relay === Relay && All.RelayQueue === RelayQueue,
  sqlite: All.MemoryRelayQueue.layer === MemoryRelayQueue.layer && All.SqliteRelayQueue.layer === SqliteRelayQueue.layer && All.SqliteInbox.layer === SqliteInbox.layer && SqliteRelay === Relay,
  postgres: All.PgRelayQueue.layer === PgRelayQueue.layer && All.PgInbox.layer === PgInbox.layer && PgRelay === Relay,
  http: All.HttpTransport.layer === HttpTransport.layer && All.HttpInbox.makeHandler === HttpInbox.makeHandler,
  dashboard: All.Dashboard.layer === Dashboard.layer
}
const wrong = Object.entries(same).filter(([, ok]) => !ok).map(([name]) => name)
if (wrong.length > 0) throw new Error(`entries differ from the main entry: ${wrong.join(", ")}`)
console.log("   entries OK:", Object.keys(same).join(" "))
EOF
sed 's/"example.ts"/"entries.ts"/' tsconfig.json >tsconfig.entries.json
npx tsc -p tsconfig.entries.json || fail "the entry points do not typecheck against the packed types"
node out/entries.js || fail "an entry point failed to load"

step "ESM only: from CommonJS, require fails with ERR_PACKAGE_PATH_NOT_EXPORTED and import() loads it"
cat >commonjs.cjs <<'EOF'
let code = "loaded"
try { require("fair-relay") } catch (error) { code = error.code }
if (code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw new Error(`require("fair-relay") gave ${code}, not ERR_PACKAGE_PATH_NOT_EXPORTED`)
import("fair-relay").then((m) => {
  if (typeof m.SqliteRelayQueue.layer !== "function") throw new Error("import() did not load SqliteRelayQueue")
  console.log("   CommonJS: require refused (ERR_PACKAGE_PATH_NOT_EXPORTED), import() loads the package")
})
EOF
node commonjs.cjs || fail "the package does not behave as the README's ESM-only note says"

step "the fair-relay bin"
npx --no-install fair-relay --help >help.out || fail "fair-relay --help failed"
grep -q "status" help.out || fail "fair-relay --help does not list the commands"
# Start time of the installed bin (no npx in between): wall and CPU seconds per run. Printed, not
# asserted: a shared CI machine's load decides the wall time.
TIMEFORMAT='%R %U %S'
for _ in 1 2 3 4 5; do
  { time node_modules/.bin/fair-relay --help >/dev/null; } 2>>start.times
done
median() { sort -n | sed -n 3p; }
echo "   fair-relay --help, median of 5 runs: $(awk '{ print $1 }' start.times | median) s wall," \
  "$(awk '{ print $2 + $3 }' start.times | median) s CPU (target < 0.3 s wall)"
npx --no-install fair-relay status --db queue.db >status.out || fail "fair-relay status failed"
cat status.out
grep -q "acked" status.out || fail "fair-relay status does not show the acked events"
npx --no-install fair-relay status --db queue.db --json >status.json || fail "fair-relay status --json failed"
node -e 'JSON.parse(require("fs").readFileSync("status.json", "utf8"))' || fail "status --json is not JSON"

echo "pack-check OK ($(basename "$tarball"))"
