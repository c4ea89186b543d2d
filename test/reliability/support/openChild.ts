/**
 * A child process for the read-only store test: `node --import tsx openChild.ts <queue> <inbox>`.
 * Opens the queue store and the receiver store (as whatever user it runs as) and, for each store
 * that opens, tries every write and a read. Prints one JSON line `{type: "result", …}` with the
 * outcome of each step: `{ ok: true, value }`, `{ ok: false, tag, code, message }` for a typed
 * error, or `{ ok: false, defect }`.
 */
import { Cause, Effect, Exit, Option } from "effect"
import * as SqliteInbox from "../../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../../src/layers/SqliteRelayQueue.js"
import * as TickClock from "../../../src/services/TickClock.js"
import { emit, runMain } from "../../../scenarios/processes/io.js"
import { inboxBusiness, TemplateTick } from "./stores.js"

export type StepOutcome =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly tag: string; readonly code: string | undefined; readonly message: string }
  | { readonly ok: false; readonly defect: string }

const outcome = (exit: Exit.Exit<unknown, unknown>): StepOutcome => {
  if (Exit.isSuccess(exit)) return { ok: true, value: exit.value }
  const failure = Cause.failureOption(exit.cause)
  if (Option.isNone(failure)) return { ok: false, defect: Cause.pretty(exit.cause).slice(0, 400) }
  const error = failure.value as { _tag?: string; message?: string; cause?: { code?: string } }
  return { ok: false, tag: String(error._tag), code: error.cause?.code, message: String(error.message) }
}

const main = async () => {
  const [queueFile, inboxFile] = process.argv.slice(2)
  if (queueFile === undefined || inboxFile === undefined) throw new Error("usage: openChild <queue> <inbox>")
  const result: Record<string, StepOutcome> = {}
  const step = async (name: string, effect: Effect.Effect<unknown, unknown>) => {
    result[name] = outcome(await Effect.runPromise(Effect.exit(effect.pipe(TickClock.at(TemplateTick)))))
  }
  await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const queue = yield* Effect.exit(SqliteRelayQueue.make({ filename: queueFile, busyTimeoutMillis: 200 }))
    result.openQueue = outcome(Exit.asVoid(queue))
    if (Exit.isSuccess(queue)) {
      const q = queue.value
      yield* Effect.promise(async () => {
        await step("enqueue", q.enqueue({ eventId: "R1", flowId: "R", body: { delta: 1 } }))
        await step("claim", q.claim)
        await step("settle", q.settle({ eventId: "C1", generation: 1 }, { _tag: "Accepted" }))
        await step("redrive", q.redrive({ eventId: "B1", expectedGeneration: 1, reason: "fix" }))
        await step("snapshot", Effect.map(q.snapshot, (s) => s.events.length))
      })
    }
    const inbox = yield* Effect.exit(SqliteInbox.make({ filename: inboxFile, business: inboxBusiness(), busyTimeoutMillis: 200 }))
    result.openInbox = outcome(Exit.asVoid(inbox))
    if (Exit.isSuccess(inbox)) {
      const i = inbox.value
      yield* Effect.promise(async () => {
        await step("receive", i.receive({ eventId: "A2", flowId: "A", seq: 2, body: { delta: 2 } }))
        await step("receipts", Effect.map(i.receipts, (r) => r.length))
      })
    }
  })))
  emit({ type: "result", result })
}

runMain(main)
