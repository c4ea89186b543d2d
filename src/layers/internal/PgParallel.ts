/**
 * Parallel claims on PostgreSQL (`claims: "parallel"`): no store-wide lock. Each write locks the
 * flow rows it decides about, and only those:
 *
 * - a claim walks the turn index with `FOR UPDATE SKIP LOCKED` (`selectLockedCandidates`): it
 *   takes the first groups, flows and heads in `(served, id)` order that no other transaction holds,
 *   so two claims never pick one head;
 * - a settle or redrive locks the flows of its events (and the events) in `(flow_id, seq)` order,
 *   waiting for a claim of the same flow to commit and then reading what it wrote;
 * - an enqueue or weight change locks its flows in `flow_id` order, creating a placeholder row
 *   (`served = -1`, no head, never a candidate) for a new flow so that two enqueues of one new
 *   flow queue on its row instead of both inserting it;
 * - turns come from the sequence `relay_ticket` (non-transactional: no hot row): an operation decides
 *   turns 2^52 + 1 … 2^52 + n (above any ticket the sequence will draw, so above any ticket
 *   another transaction can store meanwhile); when it stores the clock it draws n tickets, in a
 *   statement held for its writes (`fair_relay.turns`, a setting of the transaction), and its
 *   flows' and groups' rows take them in the same order as their statements store them — no round
 *   trip of its own;
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
import * as QueueWalk from "./QueueWalk.js"
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
 * The ticket a write's turns are decided above: 2^52, above any ticket the sequence will draw
 * (~4.5 × 10^15), with room below 2^53 (exact integers) for any batch's turns.
 */
const Decided = 2 ** 52

/**
 * A flow's or group's `served` as a parallel write stores it (`SqlRelayQueue.writes`'s `turn`): a
 * turn decided in the transaction (above `Decided`) is the ticket drawn for it, the k-th decided
 * the k-th drawn (`fair_relay.turns`, see `setClock`); a turn already stored is kept.
 */
export const turn = `CASE WHEN v.served > ${Decided} THEN (string_to_array(current_setting('fair_relay.turns', true), ',')::bigint[])[v.served - ${Decided}] ELSE v.served END`

/** The writes of one parallel transaction over `base` (which keeps every statement it does not replace). */
export const writes = (store: Store, base: QueueWrites) => {
  // The claim's walk is built once for the store, not once per transaction.
  const lockedCandidates = QueueWalk.selectLockedCandidates(store)
  return (): QueueWrites => transactionWrites(store, base, lockedCandidates)
}

/** What a parallel transaction knows of the clock (`setClock`); one per transaction. */
interface ClockState {
  /** The clock it read, its ticket `Decided`: tickets above it were decided here. */
  seen: ClockRecord | undefined
  /** The clock as it last stored it (an operation that settles and then claims stores it twice). */
  stored: ClockRecord | undefined
  /** After `lockStore`, the clock is written as decided (a reset may move the tick back). */
  exclusive: boolean
}

/**
 * Stores a parallel transaction's clock: its tick where it moved on, and the draw of the tickets
 * it decided (made once for every transaction: see `relayQueue`'s note on generators).
 */
const storeClock = Effect.fnUntraced(function*(store: Store, state: ClockState, clock: ClockRecord) {
  const { sql } = store
  if (state.seen === undefined) return yield* Effect.dieMessage("a parallel write stored the clock before reading it")
  const before = state.stored ?? state.seen
  state.stored = clock
  const count = clock.ticket - before.ticket
  const tick = state.exclusive
    ? sql`UPDATE relay_clock SET tick = ${clock.tick} WHERE id = 1`
    : clock.tick > before.tick
    ? sql`UPDATE relay_clock SET tick = ${clock.tick}
      WHERE id = (SELECT id FROM relay_clock WHERE id = 1 AND tick < ${clock.tick} FOR UPDATE SKIP LOCKED)`
    : undefined
  if (tick !== undefined) yield* execWrite(store, tick)
  if (count <= 0) return
  // The draw goes with the writes that store its tickets (`turn`), in front of them, and
  // adds to the transaction's list: later draws are above earlier ones, and the turns stay
  // in the order they were decided. A rolled-back transaction's tickets are not given back.
  yield* execWrite(store, sql`SELECT set_config('fair_relay.turns', concat_ws(',',
      NULLIF(current_setting('fair_relay.turns', true), ''),
      (SELECT string_agg(n::text, ',' ORDER BY n) FROM (SELECT nextval('relay_ticket') AS n FROM generate_series(1, ${count})) AS drawn)),
    true)`)
})

const transactionWrites = (
  store: Store,
  base: QueueWrites,
  lockedCandidates: ReturnType<typeof QueueWalk.selectLockedCandidates>
): QueueWrites => {
  const { sql } = store
  const clockState: ClockState = { seen: undefined, stored: undefined, exclusive: false }
  // Groups this transaction holds locked: it may change them. A group it did not find is new here,
  // and inserted as such (a concurrent creation of it fails the insert; the write runs again).
  const held = new Set<string>()
  const hold = <A extends { readonly group?: { readonly groupId: string } | undefined }>(rows: ReadonlyArray<A>) => {
    for (const row of rows) if (row.group !== undefined) held.add(row.group.groupId)
    return rows
  }
  const lockedEvents = (ids: ReadonlyArray<string>) =>
    sql`SELECT e.* FROM relay_event e JOIN relay_flow f ON f.flow_id = e.flow_id
      WHERE e.event_id IN ${sql.in(ids)} ORDER BY e.flow_id, e.seq FOR UPDATE OF f, e`
  const lockedFlows = (ids: ReadonlyArray<FlowId>) =>
    query(
      store,
      sql`SELECT * FROM relay_flow WHERE flow_id IN ${sql.in(ids)} ORDER BY flow_id FOR UPDATE`,
      (rows) => Exit.map(Rows.decode.flows(rows), (decoded) => decoded.filter((row) => row.served >= 0).map(Rows.toFlow))
    )
  // What this transaction replaces, over `base` as its prototype: a spread of `base` followed by
  // fields it lacks (`lockStore`) would make V8 build a new map for every transaction; an object
  // made on a prototype it already has makes none.
  const own: Partial<QueueWrites> = {
    // The ticket handed to the decision is far above every ticket drawn so far (or while it runs):
    // the turns it decides (`Decided` + 1, …) cannot be mistaken for one another transaction drew
    // after this one read the clock and stored on a flow this one then locked.
    clock: Effect.map(readClock(store), (clock) => (clockState.seen = { ...clock, ticket: Decided })),
    candidates: (now, limit) => Effect.map(lockedCandidates(now, limit), hold),
    groups: (ids) =>
      Effect.tap(SqlRelayQueue.selectGroups(store, ids, sql.literal("FOR UPDATE OF g")), (rows) => {
        for (const row of rows) held.add(row.groupId)
      }),
    // Not read with the events in one statement: its snapshot is older than the flow locks it waits
    // for, and a successor appended meanwhile would be missed. A settle reads them in the statement
    // after the locks (`startSettleRead`), anything else with `eventsAt`.
    eventsWithNext: undefined,
    events: (ids) => (ids.length === 0 ? Effect.succeed([]) : query(store, lockedEvents(ids), Rows.records.events)),
    flows: (ids) =>
      ids.length === 0 ? Effect.succeed([]) : Effect.zipRight(
        store.exec(sql`INSERT INTO relay_flow (flow_id, seq, served, head_seq, eligible_at, weight, burst)
          SELECT id, 0, -1, NULL, NULL, 1, 0 FROM unnest(${[...ids].sort(compareIds)}::text[]) AS id
          ON CONFLICT (flow_id) DO NOTHING`),
        lockedFlows(ids)
      ),
    lockStore: Effect.zipRight(
      store.exec(sql`LOCK TABLE relay_flow IN EXCLUSIVE MODE`),
      Effect.sync(() => (clockState.exclusive = true))
    ),
    setClock: (clock) => storeClock(store, clockState, clock),
    putGroups: (records) =>
      Effect.zipRight(
        base.putGroups(records.filter((group) => held.has(group.groupId))),
        SqlRelayQueue.insertGroups(store, records.filter((group) => !held.has(group.groupId)), undefined, turn)
      )
  }
  return Object.assign(Object.create(base) as QueueWrites, own)
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
  const base: QueueWrites = { ...SqlRelayQueue.writes(parallel, { lockGroups: true, turn }), clock: readClock(parallel) }
  return SqlRelayQueue.backend(parallel, base, writes(parallel, base))
}
