/**
 * How a worker reaches a receiver. The relay only needs one call: deliver an event, get a reply.
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { DeliveryReply } from "../domain/Outcomes.js"
import type { DeliveryInput } from "../domain/Records.js"
import { Inbox } from "./Inbox.js"

/** A delivery that got no reply: the receiver could not be reached or failed. The cause is kept. */
export class DeliveryFailed extends Schema.TaggedError<DeliveryFailed>()("DeliveryFailed", {
  /** The event whose delivery failed. */
  eventId: Schema.String,
  message: Schema.String,
  /** What failed (the transport's error or defect). */
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

const describeDefect = (defect: unknown): string => {
  if (defect instanceof Error) {
    const code = "code" in defect ? defect.code : undefined
    return typeof code === "string" && !defect.message.includes(code) ? `${code} ${defect.message}` : defect.message
  }
  return String(defect)
}

/**
 * Makes whatever a delivery threw — a client library's exception, a bug in a transport — a typed
 * `DeliveryFailed` for `eventId`, so the relay retries it instead of dying. Interruption passes
 * through.
 */
export const catchDefects = (eventId: string) => <A, E>(self: Effect.Effect<A, E>): Effect.Effect<A, E | DeliveryFailed> =>
  Effect.catchAllDefect(self, (defect) =>
    Effect.fail(new DeliveryFailed({ eventId, message: `transport threw: ${describeDefect(defect)}`, cause: defect })))

/** Wraps a transport so that no delivery can end in a defect (see `catchDefects`). */
export const guard = (service: TransportService): TransportService => {
  const { deliverBatch } = service
  return {
    deliver: (delivery) => catchDefects(delivery.eventId)(Effect.suspend(() => service.deliver(delivery))),
    deliverBatch: deliverBatch === undefined
      ? undefined
      : (deliveries) => catchDefects(deliveries.map((d) => d.eventId).join(","))(Effect.suspend(() => deliverBatch(deliveries)))
  }
}

/** A transport that calls an `Inbox` in the same process. */
export const fromInbox: Effect.Effect<TransportService, never, Inbox> = Effect.map(Inbox, (inbox) => guard({
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
  /** Wraps a transport of your own so that whatever it throws is a `DeliveryFailed`, never a defect. */
  static readonly guard: (service: TransportService) => TransportService = guard
}
