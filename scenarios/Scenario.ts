/**
 * The shape of a demo scenario: it runs against real files in its own directory, narrates what
 * happened, checks the numbers docs/protocol.md states, and records facts that `--check` compares
 * with the frozen results.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as path from "node:path"
import * as Counter from "../src/sample/Counter.js"
import { makeWorld } from "./World.js"
import type { World, WorldOptions } from "./World.js"

/** One comparison of an observed value with the value docs/protocol.md gives. */
export interface Check {
  readonly what: string
  readonly expected: unknown
  readonly actual: unknown
  readonly ok: boolean
}

/** What a scenario produced. */
export interface Report {
  readonly lines: Array<string>
  readonly checks: Array<Check>
  /** Stable facts (no pids, paths, timings, race winners) for the frozen comparison. */
  readonly facts: Record<string, unknown>
}

/** What a scenario is given. */
export interface Context {
  /** A fresh directory of its own. */
  readonly dir: string
  /** Sets the logical clock. */
  readonly at: (tick: number) => Effect.Effect<void>
  readonly say: (line: string) => void
  readonly check: (what: string, expected: unknown, actual: unknown) => void
  readonly fact: (key: string, value: unknown) => void
  /** Opens queue.db and inbox.db in the scenario's directory. */
  readonly world: (options?: Omit<WorldOptions, "queueFile" | "inboxFile">) => Effect.Effect<World, unknown, Scope.Scope>
}

/** A demo scenario. */
export interface Scenario {
  readonly name: string
  readonly title: string
  readonly run: (ctx: Context) => Effect.Effect<void, unknown, Scope.Scope>
}

const deepEqual = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b)

/** Builds the context of one scenario run, collecting into `report`. */
export const makeContext = (dir: string, at: Context["at"], report: Report): Context => ({
  dir,
  at,
  say: (line) => void report.lines.push(line),
  check: (what, expected, actual) => void report.checks.push({ what, expected, actual, ok: deepEqual(expected, actual) }),
  fact: (key, value) => {
    report.facts[key] = value
  },
  world: (options) =>
    makeWorld({ ...options, queueFile: path.join(dir, "queue.db"), inboxFile: path.join(dir, "inbox.db") })
})

/** The end state of both stores, as facts: events, receipts, progress, totals, audit. */
export const stores = (w: World) =>
  Effect.gen(function*() {
    const snapshot = yield* w.queue.snapshot
    return {
      clock: snapshot.clock,
      events: snapshot.events.map((e) => ({
        eventId: e.eventId,
        state: e.state,
        generation: e.generation,
        attempts: e.attempts,
        lifetimeAttempts: e.lifetimeAttempts,
        reason: e.reason
      })),
      audit: snapshot.audit,
      receipts: (yield* w.inbox.receipts).map((r) => `${r.flowId}:${r.seq}:${r.eventId}`),
      progress: Object.fromEntries(yield* w.inbox.progress),
      totals: Object.fromEntries(yield* w.inbox.read(Counter.totals))
    }
  })

/** Shows a list of ids as the article does. */
export const arrow = (ids: ReadonlyArray<string>) => ids.join(" → ")
