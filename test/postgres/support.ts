/**
 * Shared by the PostgreSQL-only tests: whether they run (FAIR_RELAY_PG_URL, as for the contract
 * suite), and how to find the backend that holds a store's write lock.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import pg from "pg"
import { describe } from "vitest"
import { pgUrl } from "../support/backends.js"

/** Why the PostgreSQL tests are skipped here, or undefined when they run. */
export const skipReason: string | undefined = pgUrl === undefined ? "SKIPPED: FAIR_RELAY_PG_URL is not set" : undefined

if (skipReason !== undefined) {
  console.warn("*** FAIR_RELAY_PG_URL is not set: the PostgreSQL-only tests of test/postgres are SKIPPED ***")
}

/**
 * `describe` when nothing is missing; otherwise a skipped suite whose name says why (`skip`), so
 * the report lists the tests as skipped instead of leaving them out.
 */
const describeUnless = (name: string, skip: string | undefined, body: () => void): void => {
  if (skip === undefined) describe(name, body)
  else describe.skip(`${name} [${skip}]`, body)
}

/** `describe` when PostgreSQL is configured (see `describeUnless`). */
export const describePg = (name: string, body: (url: string) => void): void =>
  describeUnless(name, skipReason, () => body(pgUrl ?? "postgres://unset"))

/** PgBouncer in transaction mode in front of the server of FAIR_RELAY_PG_URL (`.ci/run` starts one). */
const poolerUrl = process.env.FAIR_RELAY_PGBOUNCER_URL

/** Why the pooler tests are skipped here, or undefined when they run. */
const poolerSkipReason: string | undefined = skipReason ??
  (poolerUrl === undefined ? "SKIPPED: FAIR_RELAY_PGBOUNCER_URL is not set (.ci/run starts PgBouncer in transaction mode)" : undefined)

if (skipReason === undefined && poolerSkipReason !== undefined) {
  console.warn("*** FAIR_RELAY_PGBOUNCER_URL is not set: the pooler tests of test/postgres/pooler.test.ts are SKIPPED ***")
}

/** `describe` when PostgreSQL and the pooler in front of it are configured: the server's URL, the pooler's. */
export const describePooler = (name: string, body: (admin: string, pooler: string) => void): void =>
  describeUnless(name, poolerSkipReason, () => body(pgUrl ?? "postgres://unset", poolerUrl ?? "postgres://unset"))

/** The advisory-lock names of the two store kinds (see src/layers/internal/PgStore.ts). */
export type StoreKind = "relay_queue" | "inbox"

/**
 * Backends of this database holding the transaction advisory lock of `schema`'s `kind` store,
 * with their session state. `pg_advisory_xact_lock(k)` with a bigint key shows in `pg_locks` as
 * classid = high 32 bits, objid = low 32 bits, objsubid = 1.
 */
export const lockHolders = (admin: SqlClient, schema: string, kind: StoreKind) =>
  admin<{ pid: number; state: string | null; application_name: string; wait_event_type: string | null }>`
    WITH k AS (SELECT hashtext(${`${schema}/${kind}`})::bigint AS key)
    SELECT l.pid, a.state, a.application_name, a.wait_event_type
    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid, k
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid::bigint = ((k.key >> 32) & 4294967295)
      AND l.objid::bigint = (k.key & 4294967295)`

/**
 * Another connection's open transaction that has run `statement` and holds whatever it locked
 * until the scope ends (then it rolls back).
 */
export const holdInTransaction = (url: string, statement: string, params: ReadonlyArray<unknown> = []) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      await client.query("BEGIN")
      await client.query(statement, [...params])
      return client
    }),
    (client) => Effect.promise(() => client.query("ROLLBACK").then(() => client.end()))
  )
