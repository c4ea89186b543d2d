/**
 * Bounded storage: how long acked events, their dedup records and receipts are kept, and the
 * batched prune every backend runs. A queue's retention is its layer's option until an operator
 * sets one on the store (`RelayQueue.setPolicy`); from then on every process prunes by the
 * store's. Pruning early or late never changes an outcome of the protocol.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Metric, Schema } from "effect"
import { createHash } from "node:crypto"
import type { InvalidInput } from "../domain/Errors.js"
import * as Options from "../domain/Options.js"
import { DurationMillis } from "../domain/Options.js"
import * as Operations from "../domain/Operations.js"
import { defaultInboxRetention } from "./Inbox.js"
import type { InboxRetention } from "./Inbox.js"
import * as Metrics from "./Metrics.js"
import type { QueueBackend } from "./QueueBackend.js"

/** Retention of a queue store, as a caller writes it (`null` = keep forever). */
export interface RetentionInput {
  /** How long an acked event is kept after its ack (default 7 days). */
  readonly acked?: Duration.DurationInput | null | undefined
  /**
   * How long the dedup record of a pruned event is kept (default 30 days): within it, a
   * re-enqueue of the id is `Existing` (same flow and body) or `EnqueueConflict`; after it, the id
   * is new again.
   */
  readonly dedup?: Duration.DurationInput | null | undefined
}

/** Retention in milliseconds (ticks); `null` = keep forever. */
export interface Retention {
  /** How long an acked event is kept after its ack (null: forever). */
  readonly acked: number | null
  /** How long a pruned event's dedup record is kept (null: forever). */
  readonly dedup: number | null
}

/** Default queue retention: acked events 7 days, dedup records 30 days after pruning. */
export const defaultRetention: Retention = { acked: Duration.toMillis(Duration.days(7)), dedup: Duration.toMillis(Duration.days(30)) }

/** Rows deleted per prune transaction: short enough that a claim never waits long behind it. */
export const PruneBatchSize = 500

const Window = Schema.optional(Schema.NullOr(DurationMillis))

const decodeQueueRetention = Options.decoder(Options.record("retention", { acked: Window, dedup: Window }, "an object of durations"), "retention")

/** Validates a queue's retention option (an object of durations ≥ 0 or `null`; nothing else). */
export const decodeRetention = (input: RetentionInput | undefined, operation: string): Effect.Effect<Retention, InvalidInput> =>
  input === undefined ? Effect.succeed(defaultRetention) : Effect.map(decodeQueueRetention(input, operation), (given) => ({
    acked: windowOf(given.acked, defaultRetention.acked),
    dedup: windowOf(given.dedup, defaultRetention.dedup)
  }))

/** Validates a change of retention (as `decodeRetention` does): only the windows it names. */
export const decodeRetentionChange = (input: unknown, operation: string): Effect.Effect<Partial<Retention>, InvalidInput> =>
  Effect.map(decodeQueueRetention(input, operation), (given) => ({
    ...(given.acked === undefined ? {} : { acked: windowOf(given.acked, null) }),
    ...(given.dedup === undefined ? {} : { dedup: windowOf(given.dedup, null) })
  }))

/** A decoded window in whole milliseconds (`undefined` = `fallback`, `null` = forever). */
const windowOf = (window: number | null | undefined, fallback: number | null): number | null =>
  window === undefined ? fallback : window === null ? null : Math.floor(window)

/** Retention of an inbox store, as a caller writes it (`null` = keep forever). */
export interface InboxRetentionInput {
  /** How long a receipt is kept (default 7 days); progress is always kept. */
  readonly receipts?: Duration.DurationInput | null | undefined
}

const decodeReceiptRetention = Options.decoder(Options.record("retention", { receipts: Window }, "an object of durations"), "retention")

/** Validates an inbox's retention option (an object of durations ≥ 0 or `null`; nothing else). */
export const decodeInboxRetention = (
  input: InboxRetentionInput | undefined,
  operation: string
): Effect.Effect<InboxRetention, InvalidInput> =>
  input === undefined
    ? Effect.succeed(defaultInboxRetention)
    : Effect.map(decodeReceiptRetention(input, operation), (given) => ({ receipts: windowOf(given.receipts, defaultInboxRetention.receipts) }))

/** SHA-256 (hex) of a canonical body text: what a dedup record keeps of a pruned event's body. */
export const hashBody = (text: string): string => createHash("sha256").update(text).digest("hex")

/** What a prune is asked to do. */
export interface PruneOptions {
  /** Delete at most this many rows of each kind (default: all that are due). */
  readonly limit?: number | undefined
  /** Count what would be deleted, delete nothing. */
  readonly dryRun?: boolean | undefined
}

/** What a prune deleted (or, on a dry run, would delete). */
export interface PruneResult {
  /** Acked events deleted (each leaves a dedup record). */
  readonly events: number
  /** Expired dedup records deleted. */
  readonly dedup: number
  /** Whether nothing was deleted. */
  readonly dryRun: boolean
}

const decodePrune = Options.decoder(Options.record("prune options", { limit: Schema.optional(Options.Count(1)), dryRun: Schema.optional(Options.Flag) }))

/** Validates prune options: `dryRun` is `true` or `false` (anything else is refused, not read as a real prune). */
export const decodePruneOptions = (options: PruneOptions | undefined, operation: string) =>
  options === undefined
    ? Effect.succeed({ limit: Number.MAX_SAFE_INTEGER, dryRun: false })
    : Effect.map(decodePrune(options, operation), ({ dryRun, limit }) => ({ limit: limit ?? Number.MAX_SAFE_INTEGER, dryRun: dryRun === true }))

/**
 * Runs batches of at most `PruneBatchSize` rows, each in its own write transaction, until a batch
 * comes back short or `limit` rows are done. Returns the rows done.
 */
const batched = (limit: number, batch: (size: number) => Effect.Effect<number, SqlError>) =>
  Effect.iterate({ done: 0, last: PruneBatchSize }, {
    while: ({ done, last }) => last === PruneBatchSize && done < limit,
    body: ({ done }) => {
      const size = Math.min(PruneBatchSize, limit - done)
      return Effect.map(batch(size), (n) => ({ done: done + n, last: n === size ? PruneBatchSize : 0 }))
    }
  }).pipe(Effect.map(({ done }) => done))

/**
 * The queue's prune over a backend: acked events past `retention.acked` are deleted (each leaves
 * a dedup record), then dedup records past `retention.dedup`. Flows are never touched. The
 * retention is read when a prune starts (the store's may have changed since the last).
 */
export const makePrune = <E>(backend: QueueBackend, currentRetention: Effect.Effect<Retention, E>) =>
(options?: PruneOptions): Effect.Effect<PruneResult, InvalidInput | SqlError | E> =>
  Effect.flatMap(decodePruneOptions(options, "prune"), ({ dryRun, limit }) =>
    Effect.gen(function*() {
      const retention = yield* currentRetention
      const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      const eventCutoff = retention.acked === null ? null : now - retention.acked
      const dedupCutoff = retention.dedup === null ? null : now - retention.dedup
      if (dryRun) {
        return yield* backend.read((tx) =>
          Effect.map(tx.countPrunable(eventCutoff, dedupCutoff, limit), (counts) => ({ ...counts, dryRun: true }))
        )
      }
      const events = eventCutoff === null ? 0 : yield* batched(limit, (size) =>
        backend.write((tx) =>
          Effect.gen(function*() {
            const decided = Operations.prune(yield* tx.pruneCandidates(eventCutoff, size), eventCutoff, now, hashBody)
            if (decided.deleted.length === 0) return 0
            yield* tx.putDedup(decided.dedup)
            return yield* tx.deleteAcked(decided.deleted)
          })
        ))
      const dedup = dedupCutoff === null ? 0 : yield* batched(limit, (size) => backend.write((tx) => tx.deleteDedup(dedupCutoff, size)))
      yield* Metric.incrementBy(Metrics.prunedByKind.events, events)
      yield* Metric.incrementBy(Metrics.prunedByKind.dedup, dedup)
      return { events, dedup, dryRun: false }
    })).pipe(Effect.withSpan("RelayQueue.prune"))
