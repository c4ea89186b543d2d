// Sums a callgrind dump's instructions by where they ran — SQLite, V8's compilers, its builtins,
// its C++ runtime, its collector, JIT-compiled JavaScript — per event (used by instructions.sh):
//
//   node bench/callgrindSummary.mjs DUMP EVENTS [--top N]
//
// With --top N, also the N functions that ran most instructions of their own, outside V8's
// compilers and collector (JavaScript that V8 compiled is one entry: it has no symbols).
//
// First callgrind's own count of the dump (its `summary:` line), then the split. Each function's
// own instructions count once (a call's line carries the callee's inclusive cost and is skipped);
// they add up to the dump's `totals:` line, which callgrind writes above its `summary:` (0.2 %
// above for a 3,000-event drain, 1.6 % for a 100-event one). The groups go by object file and by
// V8's C++ namespaces; JavaScript that V8 compiled has no symbols, so it is what runs outside any
// object file.
import * as fs from "node:fs"

const [dump, eventsArgument, ...options] = process.argv.slice(2)
const events = Number(eventsArgument)
const top = options[0] === "--top" ? Number(options[1]) : 0
if (dump === undefined || !(events > 0)) {
  console.error("usage: node bench/callgrindSummary.mjs DUMP EVENTS [--top N]")
  process.exit(2)
}

const groups = [
  ["SQLite (the better-sqlite3 addon)", (object) => object.endsWith("better_sqlite3.node")],
  ["JavaScript compiled by V8", (object) => object === "???"],
  ["V8's compilers and parser", (_, fn) => /compiler::|maglev|turboshaft|interpreter::|Parser|Bytecode|Compiler::|CompilationJob/i.test(fn)],
  ["V8's garbage collector", (_, fn) => /Scaveng|heap::|Heap::|MarkCompact|Sweeper|Marking|Evacuat|PagedSpace|MemoryAllocator|NewSpace/.test(fn)],
  ["V8's builtins (inline caches, Array, Map, calls)", (_, fn) => fn.startsWith("Builtins_")],
  ["V8's C++ runtime", (_, fn) => fn.includes("v8::internal::")],
  ["libc, libstdc++", (object) => /\/lib(c|stdc\+\+|gcc_s|m)[.-]/.test(object)],
  ["Node, libuv and the rest", () => true]
]

// Names are compressed: "(id) name" the first time, "(id)" after.
const names = { ob: new Map(), fn: new Map() }
const nameOf = (kind, text) => {
  const match = /^\((\d+)\)(?:\s+(.*))?$/.exec(text)
  if (match === null) return text
  if (match[2] !== undefined) names[kind].set(match[1], match[2])
  return names[kind].get(match[1])
}

const totals = new Map(groups.map(([name]) => [name, 0]))
const byFunction = new Map()
let object = "???"
let fn = "???"
let group = groups.at(-1)[0]
const groupOf = new Map()
let skipNext = false
let total = 0
let summary = 0
for (const line of fs.readFileSync(dump, "utf8").split("\n")) {
  if (line.startsWith("summary:")) summary = Number(line.slice(8))
  const eq = line.indexOf("=")
  const key = eq > 0 ? line.slice(0, eq) : ""
  if (key === "ob" || key === "fn") {
    if (key === "ob") object = nameOf("ob", line.slice(3))
    else fn = nameOf("fn", line.slice(3))
    group = groups.find(([, test]) => test(object, fn))[0]
    groupOf.set(fn, group)
  } else if (key === "cob" || key === "cfn") nameOf(key.slice(1), line.slice(4))
  else if (key === "calls") skipNext = true
  else if (/^[+*-]?\d/.test(line) || line.startsWith("*")) {
    if (skipNext) {
      skipNext = false
      continue
    }
    const cost = Number(line.trim().split(/\s+/)[1] ?? 0)
    total += cost
    totals.set(group, totals.get(group) + cost)
    if (top > 0) byFunction.set(fn, (byFunction.get(fn) ?? 0) + cost)
  }
}

const perEvent = (n) => Math.round(n / events).toLocaleString("en").padStart(10)
console.log(`instructions: ${summary.toLocaleString("en")} in the drain, ${perEvent(summary).trim()} per event`)
console.log(`instructions per event by where they ran (${perEvent(total).trim()} in all):`)
for (const [name, n] of [...totals].sort((a, b) => b[1] - a[1])) {
  if (n > 0) console.log(`${perEvent(n)}  ${((100 * n) / total).toFixed(1).padStart(5)} %  ${name}`)
}
// How much V8 compiles, and when its collector runs a full collection, depend on heuristics that
// read the clock: those two move by several percent between runs of one build (two 3,000-event
// runs: 1.35 and 1.45 M compiler instructions per event), the rest by 0.2–1.7 %. Compare builds
// on the rest.
const steady = total - totals.get("V8's compilers and parser") - totals.get("V8's garbage collector")
console.log(`${perEvent(steady)}  without V8's compilers and collector (the figure to compare builds by)`)
if (top > 0) {
  const skipped = new Set(["V8's compilers and parser", "V8's garbage collector"])
  console.log(`the ${top} functions that ran most instructions of their own, per event (compilers and collector left out):`)
  for (const [name, n] of [...byFunction].filter(([name]) => !skipped.has(groupOf.get(name))).sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${perEvent(n)}  ${name.length > 150 ? `${name.slice(0, 150)}…` : name}`)
  }
}
