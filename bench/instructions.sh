#!/usr/bin/env bash
# Instructions per event of one drain of bench/profile.ts on the compiled library, counted by
# valgrind's callgrind over the drain alone (zeroed as it starts, dumped as it ends; V8 on one
# thread, so its compilers and collector are counted too), and where they ran
# (bench/callgrindSummary.mjs): SQLite, V8's compilers, builtins, runtime and collector, the
# JavaScript V8 compiled. Its last line — without the compilers and the collector, whose
# heuristics read the clock — is the figure to compare two builds by: two runs of one build came
# 0.2–1.7 % apart, where times on this VM move by tens of percent. About 50 times slower than the
# drain itself (3,000 events of one daemon worker: ~4 minutes; fewer events leave more of the
# code unoptimized). Needs valgrind (`apt-get install valgrind`) and `npm run build`.
#
#   npm run build && bash bench/instructions.sh 3000 --daemon --workers 1 --normal
#
# TOP=N in the environment lists the N functions that ran most instructions of their own
# (bench/callgrindSummary.mjs --top).
#
# With --pg, the same count over STEPS steps of bench/pg/profile.ts (its other options after it;
# PostgreSQL at 127.0.0.1 or --url): this process's instructions per PostgreSQL step — the client's
# CPU, which the server's waits leave out:
#
#   npm run build && bash bench/instructions.sh 2000 --pg --exchange
set -euo pipefail
cd "$(dirname "$0")/.."
events="${1:?usage: bench/instructions.sh EVENTS [bench/profile.ts options] | STEPS --pg [bench/pg/profile.ts options]}"
shift
[ -f dist/index.js ] || { echo "bench/instructions.sh: dist/ is missing; run npm run build first" >&2; exit 2; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
if [ "${1:-}" = "--pg" ]; then
  shift
  run=(bench/pg/profile.ts --steps "$events" "$@" --callgrind)
  said="^(exact|parallel|floor)|^per step"
else
  run=(bench/profile.ts "$events" "$@" --callgrind)
  said="^drained"
fi
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.%p" \
  node --single-threaded --import tsx --import ./bench/dist.mjs "${run[@]}" > "$out/log" 2>&1 ||
  { tail -20 "$out/log" >&2; exit 1; }
grep -E "$said" "$out/log"
node bench/callgrindSummary.mjs "$(ls "$out"/callgrind.*.1)" "$events" ${TOP:+--top "$TOP"}
