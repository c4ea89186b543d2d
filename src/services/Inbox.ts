/**
 * The receiver: it dedups deliveries on the event id, applies each flow in seq order, and runs
 * the user's business step inside the same transaction as the receipt, so an effect exists if
 * and only if its receipt does.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context } from "effect"
import type { Effect } from "effect"
import type { InvalidInput } from "../domain/Errors.js"
import type { DeliveryReply } from "../domain/Outcomes.js"
import type { Delivery, DeliveryInput } from "../domain/Records.js"
import type { PruneOptions } from "./Retention.js"

/** The business step's answer: applied, or refused permanently with a code. */
export type ApplyResult = { readonly _tag: "Applied" } | { readonly _tag: "Refused"; readonly code: string }

/** The step applied the delivery. */
export const applied: ApplyResult = { _tag: "Applied" }

/** The step refuses the delivery permanently; the receiver answers `Rejected{code}` and stores nothing. */
export const refuse = (code: string): ApplyResult => ({ _tag: "Refused", code })

/**
 * What a receiver does with the events it accepts. `apply` runs inside the receipt's transaction
 * on the inbox's own client: write the effect through `sql`, and do nothing there that a rollback
 * cannot undo (no e-mail, no remote call). Where no tracer is installed, `sql`'s statements and
 * savepoints run on that transaction's connection directly, without `@effect/sql`'s `sql.execute`
 * and `sql.transaction` spans (which would go nowhere); with a tracer, they keep them.
 */
export interface InboxBusiness {
  /** Creates the business tables; runs once when the inbox opens (must be idempotent). */
  readonly setup?: ((sql: SqlClient) => Effect.Effect<void, SqlError>) | undefined
  /** Applies one delivery, in seq order of its flow, exactly once. */
  readonly apply: (delivery: Delivery, sql: SqlClient) => Effect.Effect<ApplyResult, SqlError>
  /**
   * Optional: applies many deliveries of distinct flows at once (one result per delivery, in
   * order), so a batch costs a few statements instead of a savepoint and a step per delivery.
   * It must write nothing for a delivery it refuses. Without it, `apply` runs once per delivery.
   */
  readonly applyBatch?: ((deliveries: ReadonlyArray<Delivery>, sql: SqlClient) => Effect.Effect<ReadonlyArray<ApplyResult>, SqlError>) | undefined
}

/** A receipt as `receipts` lists it. */
export interface ReceiptRecord {
  /** The event applied. */
  readonly eventId: string
  /** Its flow. */
  readonly flowId: string
  /** Its seq in the flow. */
  readonly seq: number
  /** Its body. */
  readonly body: unknown
}

/** How long an inbox keeps receipts, in milliseconds (`null` = forever). */
export interface InboxRetention {
  /** How long a receipt is kept, in milliseconds (null: forever). */
  readonly receipts: number | null
}

/** Default inbox retention: receipts 7 days. */
export const defaultInboxRetention: InboxRetention = { receipts: 7 * 24 * 60 * 60 * 1000 }

/** What an inbox prune deleted (or, on a dry run, would delete). */
export interface InboxPruneResult {
  /** Receipts deleted (a dry run: that would be). */
  readonly receipts: number
  /** Whether nothing was deleted. */
  readonly dryRun: boolean
}

/** The inbox operations. */
export interface InboxService {
  /** Receives one delivery, in one transaction of the receiver's store. */
  readonly receive: (delivery: DeliveryInput) => Effect.Effect<DeliveryReply, InvalidInput | SqlError>
  /**
   * Receives many deliveries in one transaction (one commit), each in a savepoint of its own, with
   * one reply per delivery in order — what `receive` would answer for each, one after another.
   */
  readonly receiveBatch: (deliveries: ReadonlyArray<DeliveryInput>) => Effect.Effect<ReadonlyArray<DeliveryReply>, InvalidInput | SqlError>
  /** All receipts, by flow and seq. */
  readonly receipts: Effect.Effect<ReadonlyArray<ReceiptRecord>, SqlError>
  /** The last applied seq of each flow. */
  readonly progress: Effect.Effect<ReadonlyMap<string, number>, SqlError>
  /** Reads the business state with the inbox's client, in one read transaction. */
  readonly read: <A, E>(query: (sql: SqlClient) => Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError>
  /** How long this inbox keeps receipts. */
  readonly retention: InboxRetention
  /**
   * Deletes receipts past `retention.receipts` in small transactions; per-flow progress stays and
   * remembers the highest pruned seq, so a late re-delivery of a pruned event is `Duplicate`.
   * The business tables are the application's own.
   */
  readonly prune: (options?: PruneOptions) => Effect.Effect<InboxPruneResult, InvalidInput | SqlError>
}

/** The receiver service. */
export class Inbox extends Context.Tag("fair-relay/Inbox")<Inbox, InboxService>() {
  /** @see applied */
  static readonly applied = applied
  /** @see refuse */
  static readonly refuse = refuse
}
