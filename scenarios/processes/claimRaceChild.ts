/**
 * Child of the claim race (scenario 3 of docs/protocol.md), on either backend. For each
 * `{cmd: "race", store, round}` on stdin: open the queue store (a SQLite file, or a PostgreSQL
 * URL with a pool of its own), say `ready`, wait for `{cmd: "go"}` (the barrier), claim once at
 * tick 0, report the outcome, close the store. Exits 0 when stdin closes.
 */
import { Effect } from "effect"
import type { ClaimOutcome } from "../../src/domain/Outcomes.js"
import * as TickClock from "../../src/services/TickClock.js"
import { commands, describeError, emit, numberField, runMain, stringField } from "./io.js"
import { openQueue } from "./stores.js"

/** One process's claim, as the child reports it. */
export type RaceClaim =
  | {
    readonly _tag: "Claimed"
    readonly eventId: string
    readonly flowId: string
    readonly seq: number
    readonly generation: number
    readonly leaseUntil: number
  }
  | { readonly _tag: "Idle" }
  | { readonly _tag: "Failed"; readonly error: string }

const summarize = (outcome: ClaimOutcome): RaceClaim =>
  outcome._tag === "Idle"
    ? { _tag: "Idle" }
    : {
      _tag: "Claimed",
      eventId: outcome.event.eventId,
      flowId: outcome.event.flowId,
      seq: outcome.event.seq,
      generation: outcome.token.generation,
      leaseUntil: outcome.leaseUntil
    }

const main = async () => {
  const input = commands()
  for (;;) {
    const command = await input.next()
    if (command === undefined || command.cmd === "exit") return
    if (command.cmd !== "race") throw new Error(`unexpected command ${JSON.stringify(command)}`)
    const store = stringField(command, "store")
    const round = numberField(command, "round")
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function*() {
          const queue = yield* openQueue(store)
          emit({ type: "ready", round, pid: process.pid })
          const go = yield* Effect.promise(() => input.next())
          if (go?.cmd !== "go") return yield* Effect.dieMessage(`expected go, got ${JSON.stringify(go)}`)
          const claim = yield* queue.claim.pipe(
            TickClock.at(0),
            Effect.map(summarize),
            Effect.catchAll((error) => Effect.succeed<RaceClaim>({ _tag: "Failed", error: describeError(error) }))
          )
          emit({ type: "claim", round, pid: process.pid, claim })
        })
      )
    )
  }
}

runMain(main)
