/**
 * The queue store's schema, shared by every SQL backend: its embedded migrations, and the
 * protocol settings a store keeps (the policy a process runs on it).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Schema } from "effect"
import { IncompatibleStore, InvalidInput, PolicyMismatch } from "../../domain/Errors.js"
import { adoptStored, makePolicy, protocolOf, ProtocolSettings } from "../../domain/Policy.js"
import type { PolicyInput, RelayPolicy } from "../../domain/Policy.js"
import { idType } from "./Store.js"
import type { Store } from "./Store.js"

/** Embedded migrations of the queue store. */
export const migrations: Record<string, Effect.Effect<void, SqlError, SqlClient>> = {
  "1_relay_schema": Effect.gen(function*() {
    const sql = yield* SqlClient
    const id = idType(sql)
    yield* sql`CREATE TABLE relay_clock (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      tick BIGINT NOT NULL,
      ticket BIGINT NOT NULL)`
    yield* sql`INSERT INTO relay_clock (id, tick, ticket) VALUES (1, 0, 0)`
    yield* sql`CREATE TABLE relay_flow (
      flow_id ${id} PRIMARY KEY,
      seq BIGINT NOT NULL,
      served BIGINT NOT NULL,
      head_seq BIGINT,
      eligible_at BIGINT)`
    // The claim is an ordered walk of this index over flows whose head can become eligible.
    yield* sql`CREATE INDEX relay_flow_turn ON relay_flow (served, flow_id) WHERE eligible_at IS NOT NULL`
    yield* sql`CREATE TABLE relay_event (
      event_id ${id} PRIMARY KEY,
      flow_id ${id} NOT NULL,
      seq BIGINT NOT NULL,
      body TEXT NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('ready', 'inflight', 'acked', 'quarantined')),
      next_at BIGINT NOT NULL,
      lease_until BIGINT,
      generation BIGINT NOT NULL,
      attempts BIGINT NOT NULL,
      lifetime_attempts BIGINT NOT NULL,
      reason TEXT,
      UNIQUE (flow_id, seq))`
    yield* sql.onDialectOrElse({
      pg: () => sql`CREATE TABLE relay_audit (
        id BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL, reason TEXT NOT NULL, generation BIGINT NOT NULL, tick BIGINT NOT NULL)`,
      orElse: () => sql`CREATE TABLE relay_audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, reason TEXT NOT NULL, generation BIGINT NOT NULL, tick BIGINT NOT NULL)`
    })
  }),
  "2_flow_weights": Effect.gen(function*() {
    const sql = yield* SqlClient
    yield* sql`ALTER TABLE relay_flow ADD COLUMN weight BIGINT NOT NULL DEFAULT 1`
    yield* sql`ALTER TABLE relay_flow ADD COLUMN burst BIGINT NOT NULL DEFAULT 0`
  }),
  "3_flow_wake": Effect.gen(function*() {
    const sql = yield* SqlClient
    // An idle claim reports when the next head becomes eligible: the least eligible_at.
    yield* sql`CREATE INDEX relay_flow_wake ON relay_flow (eligible_at) WHERE eligible_at IS NOT NULL`
  }),
  "4_audit_actor": Effect.gen(function*() {
    const sql = yield* SqlClient
    // Who made a redrive decision, next to why.
    yield* sql`ALTER TABLE relay_audit ADD COLUMN actor TEXT`
  }),
  "5_store_settings": Effect.gen(function*() {
    const sql = yield* SqlClient
    // The protocol settings every process on this store runs (set by the first opener).
    yield* sql`CREATE TABLE relay_settings (id INTEGER PRIMARY KEY CHECK (id = 1), protocol TEXT NOT NULL)`
    // Operators page flows in turn order, drained and quarantined ones included.
    yield* sql`CREATE INDEX relay_flow_served ON relay_flow (served, flow_id)`
  }),
  "6_retention": Effect.gen(function*() {
    const sql = yield* SqlClient
    const id = idType(sql)
    // When an event was acked: retention prunes acked events by it, through a partial index.
    yield* sql`ALTER TABLE relay_event ADD COLUMN acked_at BIGINT`
    // Events acked before retention existed start their window at the store's current tick.
    yield* sql`UPDATE relay_event SET acked_at = (SELECT tick FROM relay_clock WHERE id = 1) WHERE state = 'acked'`
    yield* sql`CREATE INDEX relay_event_acked ON relay_event (acked_at) WHERE state = 'acked'`
    // What is kept of a pruned event, so a re-enqueue of its id is still recognised.
    yield* sql`CREATE TABLE relay_pruned (
      event_id ${id} PRIMARY KEY,
      flow_id ${id} NOT NULL,
      seq BIGINT NOT NULL,
      body_hash TEXT NOT NULL,
      pruned_at BIGINT NOT NULL)`
    yield* sql`CREATE INDEX relay_pruned_at ON relay_pruned (pruned_at)`
  }),
  "7_claim_mode": Effect.gen(function*() {
    const sql = yield* SqlClient
    // PostgreSQL only: how claims share the store ('exact' or 'parallel', chosen by the first
    // opener), and the ticket source of parallel claims (synchronised with relay_clock when the
    // store becomes parallel). SQLite has one writer: nothing to choose.
    yield* sql.onDialectOrElse({
      pg: () =>
        Effect.zipRight(
          sql`ALTER TABLE relay_settings ADD COLUMN claims TEXT CHECK (claims IN ('exact', 'parallel'))`,
          sql`CREATE SEQUENCE relay_ticket MINVALUE 0 START WITH 0`
        ),
      orElse: () => Effect.void
    })
  }),
  "8_flow_groups": Effect.gen(function*() {
    const sql = yield* SqlClient
    const id = idType(sql)
    // A flow's group (a tenant), fixed by its first event; null: a group of its own.
    yield* sql`ALTER TABLE relay_flow ADD COLUMN group_id ${id}`
    // A group's turn, and the least eligible_at of its flows (kept by every write of them): claims
    // walk groups in turn order as they walk flows.
    yield* sql`CREATE TABLE relay_group (
      group_id ${id} PRIMARY KEY,
      served BIGINT NOT NULL,
      weight BIGINT NOT NULL,
      burst BIGINT NOT NULL,
      eligible_at BIGINT)`
    yield* sql`CREATE INDEX relay_group_turn ON relay_group (served, group_id) WHERE eligible_at IS NOT NULL`
    // The turn index keeps flows of no group; a group's flows are walked behind its id.
    yield* sql`DROP INDEX relay_flow_turn`
    yield* sql`CREATE INDEX relay_flow_turn ON relay_flow (served, flow_id) WHERE eligible_at IS NOT NULL AND group_id IS NULL`
    yield* sql`CREATE INDEX relay_flow_group_turn ON relay_flow (group_id, served, flow_id)
      WHERE eligible_at IS NOT NULL AND group_id IS NOT NULL`
    // A group's least eligible_at, and whether it has a flow with a head (unacked events).
    yield* sql`CREATE INDEX relay_flow_group ON relay_flow (group_id, eligible_at) WHERE group_id IS NOT NULL AND head_seq IS NOT NULL`
    // A group's flows for operators.
    yield* sql`CREATE INDEX relay_flow_group_id ON relay_flow (group_id, flow_id) WHERE group_id IS NOT NULL`
  }),
  "9_acked_index_by_time": Effect.gen(function*() {
    const sql = yield* SqlClient
    // Retention's index over acked_at alone, which is set exactly when an event is acked (null in
    // every other state): a claim, which changes the state but leaves acked_at null, then changes
    // no indexed column, and PostgreSQL rewrites the row in place (a HOT update) instead of adding
    // an entry to every index of relay_event. The prune's `acked_at <= cutoff` implies the
    // predicate, so it searches the same index.
    yield* sql`DROP INDEX relay_event_acked`
    yield* sql`CREATE INDEX relay_event_acked ON relay_event (acked_at) WHERE acked_at IS NOT NULL`
  }),
  "10_operator_actions": Effect.gen(function*() {
    const sql = yield* SqlClient
    const id = idType(sql)
    // An operator may discard a quarantined head: a terminal state of its own, whose `acked_at`
    // holds when it was discarded (retention prunes it as it prunes acked events). The audit trail
    // records every operator action (what, and the flow, group or policy it touched besides an
    // event), and flows and groups may be paused. SQLite cannot change a CHECK or a NOT NULL in
    // place: its two tables are rebuilt, rows and indexes as they were.
    yield* sql.onDialectOrElse({
      pg: () =>
        Effect.all([
          sql`ALTER TABLE relay_event DROP CONSTRAINT relay_event_state_check`,
          sql`ALTER TABLE relay_event ADD CONSTRAINT relay_event_state_check
            CHECK (state IN ('ready', 'inflight', 'acked', 'quarantined', 'discarded'))`,
          sql`ALTER TABLE relay_audit ALTER COLUMN event_id DROP NOT NULL`,
          sql`ALTER TABLE relay_audit ALTER COLUMN generation DROP NOT NULL`,
          sql`ALTER TABLE relay_audit ADD COLUMN action TEXT NOT NULL DEFAULT 'redrive'`,
          sql`ALTER TABLE relay_audit ADD COLUMN target TEXT`
        ], { discard: true }),
      orElse: () =>
        Effect.all([
          sql`CREATE TABLE relay_event_next (
            event_id ${id} PRIMARY KEY,
            flow_id ${id} NOT NULL,
            seq BIGINT NOT NULL,
            body TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('ready', 'inflight', 'acked', 'quarantined', 'discarded')),
            next_at BIGINT NOT NULL,
            lease_until BIGINT,
            generation BIGINT NOT NULL,
            attempts BIGINT NOT NULL,
            lifetime_attempts BIGINT NOT NULL,
            reason TEXT,
            acked_at BIGINT,
            UNIQUE (flow_id, seq))`,
          sql`INSERT INTO relay_event_next (event_id, flow_id, seq, body, state, next_at, lease_until, generation, attempts,
              lifetime_attempts, reason, acked_at)
            SELECT event_id, flow_id, seq, body, state, next_at, lease_until, generation, attempts, lifetime_attempts, reason, acked_at
            FROM relay_event`,
          sql`DROP TABLE relay_event`,
          sql`ALTER TABLE relay_event_next RENAME TO relay_event`,
          sql`CREATE INDEX relay_event_acked ON relay_event (acked_at) WHERE acked_at IS NOT NULL`,
          sql`CREATE TABLE relay_audit_next (
            id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT, reason TEXT NOT NULL, generation BIGINT, tick BIGINT NOT NULL,
            actor TEXT, action TEXT NOT NULL DEFAULT 'redrive', target TEXT)`,
          sql`INSERT INTO relay_audit_next (id, event_id, reason, generation, tick, actor)
            SELECT id, event_id, reason, generation, tick, actor FROM relay_audit`,
          sql`DROP TABLE relay_audit`,
          sql`ALTER TABLE relay_audit_next RENAME TO relay_audit`
        ], { discard: true })
    })
    // A paused flow's head, and the heads of a paused group's flows, are not claimed; each keeps
    // its turn. Few rows are ever paused: the claim's walk passes over them.
    yield* sql`ALTER TABLE relay_flow ADD COLUMN paused INTEGER NOT NULL DEFAULT 0`
    yield* sql`ALTER TABLE relay_group ADD COLUMN paused INTEGER NOT NULL DEFAULT 0`
    // Whether anything is paused, answered from an empty index while nothing is: an idle claim's
    // read of when to wake then stays the one index entry it was.
    yield* sql`CREATE INDEX relay_flow_paused ON relay_flow (flow_id) WHERE paused <> 0`
    yield* sql`CREATE INDEX relay_group_paused ON relay_group (group_id) WHERE paused <> 0`
    // The stored policy may change while processes run: they re-read it when its version moves.
    yield* sql`ALTER TABLE relay_settings ADD COLUMN version BIGINT NOT NULL DEFAULT 0`
  }),
  "11_discard_resume": Effect.gen(function*() {
    const sql = yield* SqlClient
    // Where a flow resumes after its latest run of discarded events: the event after the run
    // (`resume_seq`) and the last seq before it (`resume_after`), which that event's delivery
    // carries as `previousSeq`. Written by discards alone; null until the flow's first one.
    yield* sql`ALTER TABLE relay_flow ADD COLUMN resume_seq BIGINT`
    yield* sql`ALTER TABLE relay_flow ADD COLUMN resume_after BIGINT`
  })
}

/** Name of the queue store's migrations table. */
export const migrationsTable = "relay_migrations"

/** The policy a layer was given, validated, or an `InvalidInput` naming the layer. */
export const decodePolicy = (input: PolicyInput | undefined, operation: string): Effect.Effect<RelayPolicy, InvalidInput> =>
  Either.match(makePolicy(input), {
    onLeft: (message) => Effect.fail(new InvalidInput({ operation, message })),
    onRight: Effect.succeed
  })

const decodeSettings = Schema.decodeUnknown(Schema.parseJson(ProtocolSettings))

/**
 * The policy this process runs on the store: a new store keeps the caller's protocol settings;
 * an existing one imposes its own, and a setting the caller gives explicitly must agree with it.
 */
export const resolvePolicy = (
  store: Store,
  requested: RelayPolicy,
  input: PolicyInput | undefined,
  name: string,
  mode: "create" | "readonly" = "create"
): Effect.Effect<RelayPolicy, IncompatibleStore | PolicyMismatch | SqlError> =>
  (mode === "create" ? store.write : store.read)(
    Effect.gen(function*() {
      const { sql } = store
      const [row] = yield* sql<{ readonly protocol: string }>`SELECT protocol FROM relay_settings WHERE id = 1`
      if (row === undefined) {
        // A read-only store written before settings were kept: it runs what the caller says.
        if (mode === "readonly") return requested
        yield* sql`INSERT INTO relay_settings (id, protocol) VALUES (1, ${JSON.stringify(protocolOf(requested))})`
        return requested
      }
      // The store's own row, not the caller's input, is at fault: a damaged store, refused as such.
      const stored = yield* Effect.mapError(
        decodeSettings(row.protocol),
        () => new IncompatibleStore({ store: name, message: "the store's protocol settings are unreadable (a damaged relay_settings row)" })
      )
      return yield* Either.match(adoptStored(stored, requested, input), {
        onRight: Effect.succeed,
        onLeft: (settings) =>
          Effect.fail(
            new PolicyMismatch({
              store: name,
              settings,
              message: `this store runs ${settings.map((key) => `${key} = ${JSON.stringify(stored[key])}`).join(", ")}; ` +
                `this process asked for ${settings.map((key) => `${key} = ${JSON.stringify(requested[key])}`).join(", ")}. ` +
                `Open it without those settings to adopt the store's.`
            })
          )
      })
    })
  )
