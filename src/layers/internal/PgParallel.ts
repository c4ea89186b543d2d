/**
 * Parallel claims on PostgreSQL (`claims: "parallel"`): no store-wide lock. Each write locks the
 * flow rows it decides about, and only those — the hot operations in their server functions
 * (`PgFunctions`), the rest here:
 *
 * - a claim walks the turn index with `FOR UPDATE SKIP LOCKED`: it takes the first group or flow
 *   in `(served, id)` order that no other transaction holds, so two claims never pick one head;
 * - a settle, redrive or discard locks the flows of its events (and the events) in `(flow_id, seq)`
 *   order, waiting for a claim of the same flow to commit and then reading what it wrote;
 * - an enqueue or weight change locks its flows in `flow_id` order, creating a placeholder row
 *   (`served = -1`, no head, never a candidate) for a new flow so that two writers of one new
 *   flow queue on its row instead of both inserting it;
 * - turns come from the sequence `relay_ticket` (non-transactional: no hot row);
 * - the tick (the time high-water mark) moves forward only when no other transaction is moving it.
 *
 * Locks are always taken in one order (claims wait for nothing; the others lock flows by id), so
 * writes of different flows never wait for each other and never deadlock. `resetClock`, the one
 * whole-store write, locks the flow table against every other writer (`lockStore`).
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Exit } from "effect"
import { PolicyMismatch } from "../../domain/Errors.js"
import type { FlowId } from "../../domain/Ids.js"
import { compareIds } from "../../domain/Protocol.js"
import type { ClockRecord } from "../../domain/Records.js"
import type { QueueBackend, QueueWrites } from "../../services/QueueBackend.js"
import * as Rows from "./QueueRows.js"
import * as SqlRelayQueue from "./SqlRelayQueue.js"
import { execWrite, query } from "./Store.js"
import type { Store } from "./Store.js"

/** How claims share a PostgreSQL store. */
export type ClaimMode = "exact" | "parallel"

/**
 * The claim mode of the store: chosen by the first process that opens it (default `fallback`), and
 * adopted by every later one; a process that asks for the other mode is refused. A store becoming
 * parallel starts its ticket sequence at the stored ticket.
 */
export const resolveMode = (
  store: Store,
  requested: ClaimMode | undefined,
  name: string,
  mode: "create" | "readonly",
  fallback: ClaimMode = "exact"
): Effect.Effect<ClaimMode, PolicyMismatch | SqlError> =>
  (mode === "create" ? store.write : store.read)(
    Effect.gen(function*() {
      const { sql } = store
      const [row] = yield* sql<{ readonly claims: ClaimMode | null }>`SELECT claims FROM relay_settings WHERE id = 1`
      const stored = row?.claims ?? null
      if (stored === null) {
        const chosen = requested ?? fallback
        if (mode === "readonly") return chosen
        yield* sql`UPDATE relay_settings SET claims = ${chosen} WHERE id = 1`
        if (chosen === "parallel") yield* sql`SELECT setval('relay_ticket', ticket, true) FROM relay_clock WHERE id = 1`
        return chosen
      }
      if (requested !== undefined && requested !== stored) {
        return yield* new PolicyMismatch({
          store: name,
          settings: ["claims"],
          message: `this store runs claims = "${stored}"; this process asked for claims = "${requested}". ` +
            `Open it without claims to adopt the store's (the mode is fixed when a store is created).`
        })
      }
      return stored
    })
  )

/** The clock of a parallel store: the tick from `relay_clock`, the ticket from the sequence. */
export const readClock = (store: Store) =>
  query(
    store,
    store.sql`SELECT c.tick, s.last_value AS ticket FROM relay_clock c CROSS JOIN relay_ticket s WHERE c.id = 1`,
    (rows) => Exit.map(Rows.decode.clock(rows), (decoded) => decoded[0]!)
  )

/**
 * The writes of one parallel transaction over `base` (which keeps every statement it does not
 * replace): the operator's and the weights' (the hot operations run
 * whole on the server, `PgOperations`), none of which takes a ticket. The tick moves forward only
 * when no other transaction is moving it; after `lockStore` (a clock reset) it is written as
 * decided.
 */
const transactionWrites = (store: Store, base: QueueWrites): QueueWrites => {
  const { sql } = store
  let exclusive = false
  let seen: ClockRecord | undefined
  // Groups this transaction holds locked: it may change them. A group it did not find is new here,
  // and inserted as such (a concurrent creation of it fails the insert; the write runs again).
  const held = new Set<string>()
  const lockedEvents = (ids: ReadonlyArray<string>) =>
    sql`SELECT e.* FROM relay_event e JOIN relay_flow f ON f.flow_id = e.flow_id
      WHERE e.event_id IN ${sql.in(ids)} ORDER BY e.flow_id, e.seq FOR UPDATE OF f, e`
  const lockedFlows = (ids: ReadonlyArray<FlowId>) =>
    query(
      store,
      sql`SELECT * FROM relay_flow WHERE flow_id IN ${sql.in(ids)} ORDER BY flow_id FOR UPDATE`,
      (rows) => Exit.map(Rows.decode.flows(rows), (decoded) => decoded.filter((row) => row.served >= 0).map(Rows.toFlow))
    )
  const own: Partial<QueueWrites> = {
    clock: Effect.map(readClock(store), (clock) => (seen = clock)),
    groups: (ids) =>
      Effect.tap(SqlRelayQueue.selectGroups(store, ids, sql.literal("FOR UPDATE OF g")), (rows) => {
        for (const row of rows) held.add(row.groupId)
      }),
    // Not read with the events in one statement: its snapshot is older than the flow locks it waits for.
    eventsWithNext: undefined,
    events: (ids) => (ids.length === 0 ? Effect.succeed([]) : query(store, lockedEvents(ids), Rows.records.events)),
    // A new flow's placeholder (served -1: never a candidate) is what two writers of it queue on.
    flows: (ids) =>
      ids.length === 0 ? Effect.succeed([]) : Effect.zipRight(
        store.exec(sql`INSERT INTO relay_flow (flow_id, seq, served, head_seq, eligible_at, weight, burst)
          SELECT id, 0, -1, NULL, NULL, 1, 0 FROM unnest(${[...ids].sort(compareIds)}::text[]) AS id
          ON CONFLICT (flow_id) DO NOTHING`),
        lockedFlows(ids)
      ),
    lockStore: Effect.zipRight(store.exec(sql`LOCK TABLE relay_flow IN EXCLUSIVE MODE`), Effect.sync(() => (exclusive = true))),
    setClock: (clock) => {
      if (exclusive) return execWrite(store, sql`UPDATE relay_clock SET tick = ${clock.tick} WHERE id = 1`)
      if (seen !== undefined && clock.tick <= seen.tick) return Effect.void
      return execWrite(store, sql`UPDATE relay_clock SET tick = ${clock.tick}
        WHERE id = (SELECT id FROM relay_clock WHERE id = 1 AND tick < ${clock.tick} FOR UPDATE SKIP LOCKED)`)
    },
    putGroups: (records) =>
      Effect.zipRight(
        base.putGroups(records.filter((group) => held.has(group.groupId))),
        SqlRelayQueue.insertGroups(store, records.filter((group) => !held.has(group.groupId)))
      )
  }
  return { ...base, ...own }
}

/** Whether `mode` is a claim mode (a layer's option is checked before anything opens). */
export const decodeMode = (value: unknown): Either.Either<ClaimMode | undefined, string> =>
  value === undefined || value === "exact" || value === "parallel"
    ? Either.right(value)
    : Either.left(`claims must be "exact" or "parallel", got ${JSON.stringify(value)}`)

/**
 * The queue's store in parallel mode: writes run in `rowLockedWrite` transactions (without the
 * store's lock; a read-only store has none and keeps refusing writes), each with its own
 * `writes`; reads take the ticket from the sequence.
 */
export const backend = (store: Store, rowLockedWrite: Store["write"] = store.write): QueueBackend => {
  const parallel: Store = { ...store, write: rowLockedWrite }
  const base: QueueWrites = { ...SqlRelayQueue.writes(parallel, { lockGroups: true }), clock: readClock(parallel) }
  return SqlRelayQueue.backend(parallel, base, () => transactionWrites(parallel, base))
}
