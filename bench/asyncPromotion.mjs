// What a fresh `Effect.async` per wait costs the garbage collector (a diagnosis, not part of a
// bench run; no library code):
//
//   node bench/asyncPromotion.mjs [iterations]
//
// Each iteration makes ~20 KB of short-lived objects, held by the fiber's continuation across one
// wait that a `setImmediate` ends, and drops them after it. The wait is either an `Effect.async`
// made for it in the same scope (`fresh`: its callback shares the scope's context, which holds
// the objects) or one made once and run every time (`reused`); `sync` does not wait, nor does
// `gen`, whose step is an `Effect.gen` that makes the objects and returns.
// Every mode runs in a child process (`gcModes.mjs`: this one's V8 flags, `--trace-gc-nvp`), and prints its time and what the
// young generation's collections (scavenges) promoted to the old one: what they found alive.
import { runModes } from "./gcModes.mjs"

const modes = ["sync", "gen", "reused", "fresh"]
const [mode, iterationsArg] = process.argv.slice(2)

if (!modes.includes(mode)) {
  runModes(import.meta.url, modes, mode ?? "50000", "waits")
} else {
  const { Effect } = await import("effect")
  const iterations = Number(iterationsArg)
  const garbage = () => Array.from({ length: 200 }, (_, i) => ({ i, s: `x${i}`, o: { v: i } }))
  const reused = Effect.async((resume) => void setImmediate(() => resume(Effect.void)))
  // `fresh` makes its wait where `held` is in scope: V8 gives the closures made in one scope one
  // context, so the wait's callback holds `held` as the continuation does, though it never reads it.
  const step = () => {
    if (mode === "gen") {
      return Effect.gen(function*() {
        const held = garbage()
        return held.length
      })
    }
    const held = garbage()
    const wait = mode === "sync"
      ? Effect.void
      : mode === "reused"
      ? reused
      : Effect.async((resume) => void setImmediate(() => resume(Effect.void)))
    return Effect.flatMap(wait, () => Effect.sync(() => held.length))
  }
  const loop = (i) => (i >= iterations ? Effect.void : Effect.flatMap(Effect.suspend(step), () => loop(i + 1)))
  const started = Date.now()
  await Effect.runPromise(loop(0))
  console.log(`took ${Date.now() - started} ms`)
}
