/**
 * Identifiers and counters of the relay protocol.
 *
 * Ids are validated once at the boundary and branded, so code inside the library never has to
 * ask again whether an id is blank, oversized or carries control characters.
 */
import { Schema } from "effect"

/** Longest id accepted, in UTF-16 code units. */
export const MaxIdLength = 200

// Control characters (C0, DEL, C1) break logs, terminals and CSV exports of operators.
// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f-\u009f]/
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

const identifier = (name: string) =>
  Schema.String.pipe(
    Schema.filter((s) => {
      if (s.length === 0) return `${name} must not be empty`
      if (s.length > MaxIdLength) return `${name} must be at most ${MaxIdLength} characters (got ${s.length})`
      if (s.trim().length === 0) return `${name} must not be blank`
      if (controlCharacters.test(s)) return `${name} must not contain control characters`
      // A lone surrogate has no UTF-8 form: stored, it would come back as another id.
      if (loneSurrogate.test(s)) return `${name} must be well-formed Unicode (it has a lone surrogate)`
      return true
    })
  )

/** The stable, caller-chosen id of one event; the receiver deduplicates on it. */
export const EventId = identifier("eventId").pipe(Schema.brand("fair-relay/EventId"))
/** @see EventId */
export type EventId = typeof EventId.Type

/** The ordering key: events of one flow are delivered in their seq order. */
export const FlowId = identifier("flowId").pipe(Schema.brand("fair-relay/FlowId"))
/** @see FlowId */
export type FlowId = typeof FlowId.Type

/**
 * A group of flows (a tenant): claims rotate across groups first, then across the group's flows.
 * A flow without one is a group of its own.
 */
export const GroupId = identifier("group").pipe(Schema.brand("fair-relay/GroupId"))
/** @see GroupId */
export type GroupId = typeof GroupId.Type

/** A point of relay time (logical ticks in the scenarios, milliseconds in production). */
export const Tick = Schema.Int.pipe(Schema.nonNegative())

/** A per-flow sequence number, assigned at enqueue from 1. */
export const Seq = Schema.Int.pipe(Schema.positive())

/** How many times an event was (re)opened for claiming; a token is only valid for one. */
export const Generation = Schema.Int.pipe(Schema.nonNegative())
