/**
 * The worker: claim a head, deliver it without holding the queue's lock, settle the reply.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Duration, Effect, Layer } from "effect"
import type { ClockRegressed, InvalidInput } from "../domain/Errors.js"
import type { Claimed, DeliveryReply, SettleOutcome } from "../domain/Outcomes.js"
import { RelayQueue } from "./RelayQueue.js"
import { Transport } from "./Transport.js"
import type { DeliveryFailed } from "./Transport.js"

/** What one step did. */
export type StepResult =
  | { readonly _tag: "Idle" }
  | {
    readonly _tag: "Delivered"
    readonly claimed: typeof Claimed.Type
    readonly reply: DeliveryReply
    readonly outcome: SettleOutcome
  }

/** Errors of a step: the queue's, or a delivery that got no reply (no settle is written then). */
export type StepError = ClockRegressed | InvalidInput | SqlError | DeliveryFailed

/** Options of the polling loop. */
export interface RunOptions {
  /** How long to sleep after an idle claim (default 100 ms). */
  readonly idleDelay?: Duration.DurationInput | undefined
}

/** The worker operations. */
export interface RelayService {
  /** One claim → deliver → settle. */
  readonly step: Effect.Effect<StepResult, StepError>
  /** Steps forever, sleeping `idleDelay` whenever nothing is eligible. */
  readonly run: (options?: RunOptions) => Effect.Effect<never, StepError>
}

/** Builds a worker over a queue and a transport. */
export const make: Effect.Effect<RelayService, never, RelayQueue | Transport> = Effect.gen(function*() {
  const queue = yield* RelayQueue
  const transport = yield* Transport

  const step: Effect.Effect<StepResult, StepError> = Effect.gen(function*() {
    const claimed = yield* queue.claim
    if (claimed._tag === "Idle") return claimed
    const { event } = claimed
    const reply = yield* transport.deliver({ eventId: event.eventId, flowId: event.flowId, seq: event.seq, body: event.body })
    const outcome = yield* queue.settle(claimed.token, reply)
    return { _tag: "Delivered", claimed, reply, outcome } as const
  }).pipe(Effect.withSpan("Relay.step"))

  const run = (options?: RunOptions) => {
    const idle = Duration.decode(options?.idleDelay ?? Duration.millis(100))
    return Effect.forever(Effect.flatMap(step, (result) => (result._tag === "Idle" ? Effect.sleep(idle) : Effect.void)))
  }

  return { step, run }
})

/** The worker service. */
export class Relay extends Context.Tag("fair-relay/Relay")<Relay, RelayService>() {
  /** A layer providing `Relay` from `RelayQueue` and `Transport`. */
  static readonly layer: Layer.Layer<Relay, never, RelayQueue | Transport> = Layer.effect(Relay, make)
}
