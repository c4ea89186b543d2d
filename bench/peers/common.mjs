// Shared by the peer drivers (plain JavaScript, run with plain node from their own folders so they
// resolve their own node_modules; see bench/peers.ts for the parent side).
// argv[2]: JSON { events, flows, workers, dir, maxSeconds }
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"

export const options = JSON.parse(process.argv[2] ?? "{}")

/** The i-th job: flows take turns, so each flow's seqs are 1, 2, 3, … (the same workload as ours). */
export const job = (i, flows) => ({ key: `flow-${String(i % flows).padStart(6, "0")}`, seq: Math.floor(i / flows) + 1, delta: 1 })

/** Records, in the handler, the last seq per key: a job that is not the next of its key is an order violation. */
export const orderTracker = () => {
  const last = new Map()
  const tracker = {
    handled: 0,
    completed: 0,
    violations: 0,
    handle(data) {
      tracker.handled++
      if (data.seq !== (last.get(data.key) ?? 0) + 1) tracker.violations++
      last.set(data.key, data.seq)
    }
  }
  return tracker
}

/** CPU time of this process so far, µs. */
export const cpuMicros = () => {
  const used = process.cpuUsage()
  return used.user + used.system
}

/** The installed version of a package, as resolved from `from` (a file URL). */
export const versionOf = (name, from) => {
  const require = createRequire(from)
  let dir = require.resolve(name)
  for (;;) {
    const next = dir.slice(0, dir.lastIndexOf("/"))
    if (next === dir || next === "") throw new Error(`no package.json above ${name}`)
    dir = next
    try {
      const pkg = JSON.parse(readFileSync(`${dir}/package.json`, "utf8"))
      if (pkg.name === name) return pkg.version
    } catch {}
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits until `done()` or `maxSeconds` from `started` (performance.now()). */
export const waitFor = async (done, started, maxSeconds) => {
  while (!done() && performance.now() - started < maxSeconds * 1000) await sleep(1)
}

/** Enqueues every job one call at a time (awaiting each), timed. */
export const enqueueAll = async (add) => {
  const cpu = cpuMicros()
  const started = performance.now()
  for (let i = 0; i < options.events; i++) await add(job(i, options.flows))
  const seconds = (performance.now() - started) / 1000
  return { events: options.events, seconds, eventsPerSecond: options.events / seconds, cpuUsPerEvent: (cpuMicros() - cpu) / options.events }
}

/** The figures of a processing phase. */
export const processed = (tracker, seconds, cpu) => ({
  drained: tracker.completed,
  complete: tracker.completed === options.events,
  seconds,
  eventsPerSecond: tracker.completed / seconds,
  cpuUsPerEvent: cpu / Math.max(1, tracker.completed),
  handled: tracker.handled,
  orderViolations: tracker.violations
})

/** The child's answer to bench/peers.ts: one line, prefixed. */
export const report = (result) => {
  process.stdout.write(`\nPEER-RESULT ${JSON.stringify(result)}\n`)
}

/** A logger that keeps the peers' info/debug lines off the bench's output. */
export const quietLogger = { error: console.error, warn: console.warn, info() {}, debug() {} }
