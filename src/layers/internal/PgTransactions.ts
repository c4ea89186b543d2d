/**
 * PostgreSQL transactions in as few round trips as their statements allow:
 *
 * - BEGIN is not sent on its own. It waits for the transaction's first statement and goes with it:
 *   a first statement without parameters (the store's clock, say) joins BEGIN, the lock timeout
 *   and the store's lock in one simple-protocol query — one round trip instead of two; any other
 *   first statement follows them. A transaction that ran nothing sends neither BEGIN nor COMMIT.
 * - The store's statements run as named prepared statements (`execPrepared`).
 *
 * Each statement of a multi-statement query takes its own snapshot (READ COMMITTED), so the
 * statement after the lock reads what the lock's previous holder committed.
 */
import { SqlError } from "@effect/sql/SqlError"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type * as Statement from "@effect/sql/Statement"
import { Effect, Option, Scope, Stream } from "effect"
import type * as Pg from "pg"
import { execOnConnection, logStatement } from "./Store.js"

/** A transaction's connection that sends `begin` with its first statement. */
class LazyBegin implements Connection {
  begun = false
  constructor(readonly conn: Connection & { readonly pg: Pg.PoolClient }, readonly begin: string) {}
  /** BEGIN and the rest of `begin`, if not sent yet. */
  readonly ensure = Effect.suspend(() => {
    if (this.begun) return Effect.void
    this.begun = true
    return Effect.asVoid(this.conn.executeUnprepared(this.begin, [], undefined))
  })
  get pg() {
    return this.conn.pg
  }
  readonly execute: Connection["execute"] = (sql, params, transform) => Effect.zipRight(this.ensure, this.conn.execute(sql, params, transform))
  readonly executeRaw: Connection["executeRaw"] = (sql, params) => Effect.zipRight(this.ensure, this.conn.executeRaw(sql, params))
  readonly executeValues: Connection["executeValues"] = (sql, params) => Effect.zipRight(this.ensure, this.conn.executeValues(sql, params))
  readonly executeUnprepared: Connection["executeUnprepared"] = (sql, params, transform) =>
    Effect.zipRight(this.ensure, this.conn.executeUnprepared(sql, params, transform))
  readonly executeStream: Connection["executeStream"] = (sql, params, transform) =>
    Stream.unwrap(Effect.as(this.ensure, this.conn.executeStream(sql, params, transform)))
  /** COMMIT or ROLLBACK, if BEGIN was sent. */
  end(statement: "COMMIT" | "ROLLBACK") {
    return this.begun ? Effect.asVoid(this.conn.executeUnprepared(statement, [], undefined)) : Effect.void
  }
}

/**
 * Transactions on `sql` that open with `begin` (BEGIN and what the transaction needs before its
 * first statement: its isolation, lock timeout, the store's lock; no parameters), sent with that
 * first statement. Like `sql.withTransaction` otherwise: a connection of the pool for the
 * transaction, COMMIT or ROLLBACK at its end, savepoints when nested.
 */
export const transactions = (sql: SqlClient.SqlClient, begin: string) =>
  SqlClient.makeWithTransaction({
    transactionTag: SqlClient.TransactionConnection,
    spanAttributes: [],
    acquireConnection: Effect.flatMap(Scope.make(), (scope) =>
      Effect.map(
        Scope.extend(sql.reserve, scope),
        (conn) => [scope, new LazyBegin(conn as Connection & { readonly pg: Pg.PoolClient }, begin)] as const
      )),
    begin: () => Effect.void,
    savepoint: (conn, id) => Effect.asVoid(conn.executeUnprepared(`SAVEPOINT fair_relay_${id}`, [], undefined)),
    commit: (conn) => (conn as LazyBegin).end("COMMIT"),
    rollback: (conn) => (conn as LazyBegin).end("ROLLBACK"),
    rollbackSavepoint: (conn, id) => Effect.asVoid(conn.executeUnprepared(`ROLLBACK TO SAVEPOINT fair_relay_${id}`, [], undefined))
  })

// Statement texts and the names they are prepared under (one name per text, for every connection).
const prepared = new Map<string, string>()
const MaxPrepared = 500
let names = 0

const failed = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

/**
 * Runs one of the store's statements on the transaction's connection as a named prepared
 * statement: the server parses and plans a statement once per connection instead of on every
 * call (most of a small transaction's server time). Texts beyond the first 500 (bulk statements
 * of unusual sizes) run unnamed. A transaction's first statement goes with its BEGIN (unprepared
 * when it has no parameters: one query). Outside a transaction it runs as usual.
 */
export const execPrepared = <A extends object>(statement: Statement.Statement<A>): Effect.Effect<ReadonlyArray<A>, SqlError> =>
  Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) => {
    const connection = Option.isSome(transaction) ? transaction.value[0] : undefined
    const client = (connection as { readonly pg?: Pg.PoolClient } | undefined)?.pg
    if (connection === undefined || client === undefined) return execOnConnection(statement)
    const [text, params] = statement.compile()
    if (connection instanceof LazyBegin && !connection.begun && params.length === 0) {
      connection.begun = true
      return Effect.zipRight(
        logStatement(text),
        Effect.async<ReadonlyArray<A>, SqlError>((resume) => {
          client.query(`${connection.begin}; ${text}`, (error, results) => {
            if (error) return resume(Effect.fail(failed(error)))
            const all = results as unknown as ReadonlyArray<Pg.QueryResult<A>>
            resume(Effect.succeed(all[all.length - 1]!.rows))
          })
        })
      )
    }
    let name = prepared.get(text)
    if (name === undefined && prepared.size < MaxPrepared) {
      name = `fair_relay_${names++}`
      prepared.set(text, name)
    }
    const run = Effect.async<ReadonlyArray<A>, SqlError>((resume) => {
      client.query<A>({ name, text, values: params as Array<unknown> }, (error, result) => {
        // A table changed under a prepared statement (another process migrated the store): the
        // statement fails once, and the text is prepared afresh under a new name next time.
        if ((error as { readonly code?: unknown } | undefined)?.code === "0A000") prepared.delete(text)
        resume(error ? Effect.fail(failed(error)) : Effect.succeed(result.rows))
      })
    })
    return Effect.zipRight(logStatement(text), connection instanceof LazyBegin ? Effect.zipRight(connection.ensure, run) : run)
  })
