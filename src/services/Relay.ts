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

/** What one batched step did: replies settled, and deliveries that got no reply (left to their lease). */
export interface BatchResult {
  readonly delivered: ReadonlyArray<Extract<StepResult, { readonly _tag: "Delivered" }>>
  readonly failed: ReadonlyArray<{ readonly claimed: typeof Claimed.Type; readonly error: DeliveryFailed }>
}

/** Options of the polling loop. */
export interface RunOptions {
  /** How long to sleep after an idle claim (default 100 ms). */
  readonly idleDelay?: Duration.DurationInput | undefined
  /** Claim and settle this many heads per transaction (default 1: single steps). */
  readonly batchSize?: number | undefined
}

/** The worker operations. */
export interface RelayService {
  /** One claim → deliver → settle. */
  readonly step: Effect.Effect<StepResult, StepError>
  /** Claims up to `size` heads in one transaction, delivers them, settles the replies in one transaction. */
  readonly stepBatch: (size: number) => Effect.Effect<BatchResult, Exclude<StepError, DeliveryFailed>>
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
    const reply = yield* deliver(claimed)
    const outcome = yield* queue.settle(claimed.token, reply)
    return { _tag: "Delivered", claimed, reply, outcome } as const
  }).pipe(Effect.withSpan("Relay.step"))

  const deliver = (claimed: typeof Claimed.Type) =>
    transport.deliver({ eventId: claimed.event.eventId, flowId: claimed.event.flowId, seq: claimed.event.seq, body: claimed.event.body })

  const stepBatch = (size: number) =>
    Effect.gen(function*() {
      const claims = yield* queue.claimBatch(size)
      const replies = yield* Effect.forEach(claims, (claimed) => Effect.either(deliver(claimed)))
      const delivered: Array<{ readonly claimed: typeof Claimed.Type; readonly reply: DeliveryReply }> = []
      const failed: Array<BatchResult["failed"][number]> = []
      claims.forEach((claimed, i) => {
        const reply = replies[i]!
        if (reply._tag === "Right") delivered.push({ claimed, reply: reply.right })
        else failed.push({ claimed, error: reply.left })
      })
      const outcomes = delivered.length === 0
        ? []
        : yield* queue.settleBatch(delivered.map(({ claimed, reply }) => ({ token: claimed.token, reply })))
      return {
        delivered: delivered.map(({ claimed, reply }, i) => ({ _tag: "Delivered", claimed, reply, outcome: outcomes[i]! }) as const),
        failed
      }
    }).pipe(Effect.withSpan("Relay.stepBatch"))

  const run = (options?: RunOptions) => {
    const idle = Duration.decode(options?.idleDelay ?? Duration.millis(100))
    const size = options?.batchSize ?? 1
    const once: Effect.Effect<boolean, StepError> = size <= 1
      ? Effect.map(step, (result) => result._tag !== "Idle")
      : Effect.map(stepBatch(size), (result) => result.delivered.length + result.failed.length > 0)
    return Effect.forever(Effect.flatMap(once, (busy) => (busy ? Effect.void : Effect.sleep(idle))))
  }

  return { step, stepBatch, run }
})

/** The worker service. */
export class Relay extends Context.Tag("fair-relay/Relay")<Relay, RelayService>() {
  /** A layer providing `Relay` from `RelayQueue` and `Transport`. */
  static readonly layer: Layer.Layer<Relay, never, RelayQueue | Transport> = Layer.effect(Relay, make)
}
