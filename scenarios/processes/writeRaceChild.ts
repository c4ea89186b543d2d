/**
 * Child of the write race. Arguments: `<file> <index> <count> <flowId>`. Opens the queue file,
 * says `ready`, waits for `{cmd: "go"}`, then `count` times: enqueue `P<index>-<n>` into the
 * shared flow, claim once, and settle `Accepted` if the claim got something — every operation a
 * write transaction that reads before it writes, all at tick 0. Reports everything and exits.
 */
import { Effect } from "effect"
import { SqliteRelayQueue, TickClock } from "../../src/index.js"
import { commands, describeError, emit, runMain } from "./io.js"

/** What one writer did. */
export interface WriterReport {
  readonly index: number
  readonly pid: number
  /** Its own events, with the seq the queue gave each, in enqueue order. */
  readonly enqueued: ReadonlyArray<{ readonly eventId: string; readonly seq: number }>
  /** Events it claimed (any writer's), with the settle outcome, in claim order. */
  readonly claims: ReadonlyArray<{ readonly eventId: string; readonly seq: number; readonly generation: number; readonly outcome: string }>
  /** Claims that found nothing eligible. */
  readonly idleClaims: number
  /** Failed operations (expected none). */
  readonly errors: ReadonlyArray<string>
  /** Wall time from the barrier to the last write. */
  readonly elapsedMillis: number
}

const main = async () => {
  const [file, indexText, countText, flowId] = process.argv.slice(2)
  if (file === undefined || indexText === undefined || countText === undefined || flowId === undefined) {
    throw new Error("usage: writeRaceChild <file> <index> <count> <flowId>")
  }
  const index = Number(indexText)
  const count = Number(countText)
  const input = commands()
  const report = await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const queue = yield* SqliteRelayQueue.make({ filename: file })
        emit({ type: "ready", pid: process.pid })
        const go = yield* Effect.promise(() => input.next())
        input.close()
        if (go?.cmd !== "go") return yield* Effect.dieMessage(`expected go, got ${JSON.stringify(go)}`)
        const started = Date.now()
        const enqueued: Array<{ eventId: string; seq: number }> = []
        const claims: Array<{ eventId: string; seq: number; generation: number; outcome: string }> = []
        const errors: Array<string> = []
        let idleClaims = 0
        const record = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A | undefined> =>
          Effect.catchAll(effect, (error) =>
            Effect.sync(() => {
              errors.push(describeError(error))
              return undefined
            }))
        for (let n = 1; n <= count; n++) {
          const eventId = `P${index}-${n}`
          const result = yield* record(queue.enqueue({ eventId, flowId, body: { delta: 1 } }))
          if (result?._tag === "Enqueued") enqueued.push({ eventId, seq: result.seq })
          else if (result !== undefined) errors.push(`${eventId}: unexpected ${result._tag}`)
          const claimed = yield* record(queue.claim)
          if (claimed === undefined) continue
          if (claimed._tag === "Idle") {
            idleClaims++
            continue
          }
          const { event, token } = claimed
          const settled = yield* record(queue.settle(token, { _tag: "Accepted" }))
          claims.push({
            eventId: event.eventId,
            seq: event.seq,
            generation: token.generation,
            outcome: settled === undefined ? "Failed" : settled._tag
          })
        }
        return {
          index,
          pid: process.pid,
          enqueued,
          claims,
          idleClaims,
          errors,
          elapsedMillis: Date.now() - started
        } satisfies WriterReport
      })
    ).pipe(TickClock.at(0))
  )
  emit({ type: "report", report })
}

runMain(main)
