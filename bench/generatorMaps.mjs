// What a generator function made afresh for each call costs the garbage collector (a diagnosis,
// not part of a bench run):
//
//   node bench/generatorMaps.mjs [iterations]
//
// Each iteration makes ~3 KB of objects that the step's closure captures, runs the step and drops
// it. The step is a `function*` made in the iteration (`fresh-gen`: V8 gives every new generator
// function, the first time it is called, a new initial map — allocated in the old generation, it
// points back to the function, hence to all the function captures), the same `function*` made once
// with the objects as its argument (`hoisted-gen`), a plain function made in the iteration
// (`fresh-fn`), and the same three through Effect: `Effect.gen(function*() {…})` per call
// (`effect-gen`) against a generator made once with `Effect.fnUntraced` (`effect-fn`).
// Every mode runs in a child process (`gcModes.mjs`, under `--trace-gc-nvp`) and prints what the young generation's
// collections (scavenges) promoted to the old one: what they found alive.
import { runModes } from "./gcModes.mjs"

const modes = ["fresh-fn", "fresh-gen", "hoisted-gen", "effect-gen", "effect-fn"]
const [mode, iterationsArg] = process.argv.slice(2)

if (!modes.includes(mode)) {
  runModes(import.meta.url, modes, mode ?? "200000", "steps")
} else {
  const { Effect } = await import("effect")
  const iterations = Number(iterationsArg)
  const garbage = () => Array.from({ length: 100 }, (_, i) => ({ i, o: { v: i } }))
  const hoisted = function*(held) {
    yield held.length
    return held.length
  }
  const once = Effect.fnUntraced(function*(held) {
    yield* Effect.void
    return held.length
  })
  let sink = 0
  const started = Date.now()
  if (mode.startsWith("effect")) {
    const step = () => {
      const held = garbage()
      return mode === "effect-fn" ? once(held) : Effect.gen(function*() {
        yield* Effect.void
        return held.length
      })
    }
    const loop = (i) => (i >= iterations ? Effect.void : Effect.flatMap(Effect.suspend(step), (n) => (sink += n, loop(i + 1))))
    await Effect.runPromise(loop(0))
  } else {
    for (let i = 0; i < iterations; i++) {
      const held = garbage()
      if (mode === "fresh-fn") {
        const f = () => held.length
        sink += f()
        continue
      }
      const gen = mode === "hoisted-gen" ? hoisted(held) : (function*() {
        yield held.length
        return held.length
      })()
      gen.next()
      sink += gen.next().value
    }
  }
  console.log(`took ${Date.now() - started} ms`)
  if (sink < 0) console.log(sink)
}
