/**
 * Child of the PostgreSQL claim race (SPEC §5 scenario 3 on PgRelayQueue). For each
 * `{cmd: "race", url, round}` on stdin: open the queue store at `url` (its own pool), say
 * `ready`, wait for `{cmd: "go"}` (the barrier), claim once at tick 0, report the outcome, close
 * the pool. Exits 0 when stdin closes. The messages are those of `../claimRaceChild.ts`.
 */
import { Effect } from "effect"
// The modules themselves rather than src/index.ts: a child loads less (faster start-up).
import type { ClaimOutcome } from "../../../src/domain/Outcomes.js"
import * as PgRelayQueue from "../../../src/layers/PgRelayQueue.js"
import * as TickClock from "../../../src/services/TickClock.js"
import type { RaceClaim } from "../claimRaceChild.js"
import { commands, describeError, emit, numberField, runMain, stringField } from "../io.js"

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
    const url = stringField(command, "url")
    const round = numberField(command, "round")
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function*() {
          const queue = yield* PgRelayQueue.make({ url, maxConnections: 1 })
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
