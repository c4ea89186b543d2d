/**
 * How a worker reaches a receiver. The relay only needs one call: deliver an event, get a reply.
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { DeliveryReply } from "../domain/Outcomes.js"
import type { DeliveryInput } from "../domain/Records.js"
import { Inbox } from "./Inbox.js"

/** A delivery that got no reply: the receiver could not be reached or failed. The cause is kept. */
export class DeliveryFailed extends Schema.TaggedError<DeliveryFailed>()("DeliveryFailed", {
  eventId: Schema.String,
  message: Schema.String,
  cause: Schema.Defect
}) {}

/** The transport operations. */
export interface TransportService {
  /** Sends one event to the receiver and returns its reply. */
  readonly deliver: (delivery: DeliveryInput) => Effect.Effect<DeliveryReply, DeliveryFailed>
  /**
   * Sends many events at once and returns one reply per event, in order; optional. A transport
   * that has it lets batched workers pay one receiver commit per batch.
   */
  readonly deliverBatch?: ((deliveries: ReadonlyArray<DeliveryInput>) => Effect.Effect<ReadonlyArray<DeliveryReply>, DeliveryFailed>) | undefined
}

/** A transport that calls an `Inbox` in the same process. */
export const fromInbox: Effect.Effect<TransportService, never, Inbox> = Effect.map(Inbox, (inbox) => ({
  deliver: (delivery) =>
    Effect.mapError(inbox.receive(delivery), (cause) =>
      new DeliveryFailed({ eventId: delivery.eventId, message: `inbox failed: ${cause.message}`, cause })),
  deliverBatch: (deliveries) =>
    Effect.mapError(inbox.receiveBatch(deliveries), (cause) =>
      new DeliveryFailed({
        eventId: deliveries.map((d) => d.eventId).join(","),
        message: `inbox failed: ${cause.message}`,
        cause
      }))
}))

/** The transport service. */
export class Transport extends Context.Tag("fair-relay/Transport")<Transport, TransportService>() {
  /** A transport that calls an `Inbox` in the same process. */
  static readonly layerInbox: Layer.Layer<Transport, never, Inbox> = Layer.effect(Transport, fromInbox)
}
