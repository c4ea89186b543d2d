/**
 * The receiver's side of the protocol: dedup on the event id, order on the flow's seq.
 */
import type { DeliveryReply } from "./Outcomes.js"

/** A stored receipt: the identity of an event the receiver applied. */
export interface Receipt {
  readonly eventId: string
  readonly flowId: string
  readonly seq: number
  readonly bodyText: string
}

/** A delivery as the receiver decides it: its receipt, and the seq before it when discards skipped some. */
export interface Incoming extends Receipt {
  readonly previousSeq?: number | undefined
}

/** What the receiver does with a delivery: apply it, or answer without applying. */
export type ReceiveDecision = { readonly _tag: "Apply" } | { readonly _tag: "Reply"; readonly reply: DeliveryReply }

/**
 * Decides a delivery from the receipt stored under its id (if any), the last seq applied for its
 * flow, and the highest seq whose receipt retention pruned (`prunedThrough`). Only
 * `seq = last + 1` under a new id is applied — or a later seq whose `previousSeq` the receiver has
 * applied: the queue says every seq between them was discarded by an operator, never to be
 * delivered (at or below `last` too: an event applied but discarded after its reply was lost).
 * Everything else is answered. A seq at or below `prunedThrough` without a receipt was applied
 * and its receipt pruned: a late re-delivery of it is `Duplicate` (acked, never applied twice) —
 * its id and body can no longer be compared.
 */
export const decideReceive = (
  delivery: Incoming,
  stored: Receipt | undefined,
  lastApplied: number,
  prunedThrough = 0
): ReceiveDecision => {
  if (stored !== undefined) {
    const same = stored.flowId === delivery.flowId && stored.seq === delivery.seq && stored.bodyText === delivery.bodyText
    return { _tag: "Reply", reply: same ? { _tag: "Duplicate" } : { _tag: "IdConflict" } }
  }
  if (delivery.seq <= prunedThrough) return { _tag: "Reply", reply: { _tag: "Duplicate" } }
  if (delivery.seq <= lastApplied) return { _tag: "Reply", reply: { _tag: "SequenceConflict" } }
  if (delivery.seq > lastApplied + 1 && (delivery.previousSeq === undefined || delivery.previousSeq > lastApplied)) {
    return { _tag: "Reply", reply: { _tag: "Gap", expected: lastApplied + 1 } }
  }
  return { _tag: "Apply" }
}
