/**
 * PostgreSQL transactions in as few round trips as their statements allow:
 *
 * - BEGIN is not sent on its own. It waits for the transaction's first statement and goes with it:
 *   a first statement without parameters (the store's clock, say) joins BEGIN, the lock timeout
 *   and the store's lock in one simple-protocol query — one round trip instead of two; any other
 *   first statement follows them. A transaction that ran nothing sends neither BEGIN nor COMMIT.
 * - The store's statements run as named prepared statements (`execPrepared`).
 * - COMMIT is not sent on its own when the transaction's last statement can wait for it (writes
 *   held until the end, `PgHeldWrites`): both go in one round trip (`atCommit`).
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

/** The last statement of a transaction, sent with its COMMIT. */
interface Last {
  readonly name: string | undefined
  readonly text: string
  readonly values: ReadonlyArray<Primitive>
}

type Primitive = string | number | bigint | boolean | null

const isPrimitive = (value: unknown): value is Primitive =>
  value === null || typeof value === "string" || typeof value === "number" || typeof value === "bigint" || typeof value === "boolean"

/** What `pg` sends: text for every value but NULL. */
const wireValue = (value: Primitive) => (value === null ? null : String(value))

/** The part of `pg`'s connection a submittable uses (the extended protocol's messages). */
interface Wire {
  readonly stream: { readonly cork?: () => void; readonly uncork?: () => void }
  readonly parsedStatements: Record<string, string | undefined>
  readonly submittedNamedStatements?: Record<string, string | undefined>
  parse(message: { readonly text: string; readonly name?: string | undefined; readonly types?: ReadonlyArray<number> }): void
  bind(message: { readonly statement?: string | undefined; readonly values?: ReadonlyArray<unknown>; readonly valueMapper?: (value: Primitive) => unknown }): void
  execute(message: { readonly portal?: string }): void
  sync(): void
  sendCopyFail(message: string): void
}

/**
 * A statement and COMMIT as one round trip: both are parsed, bound and executed, then one Sync.
 * If the statement fails, the server skips the COMMIT (the transaction is left failed, and the
 * caller rolls it back); the answer is the error, else the COMMIT's command tag (`ROLLBACK` if the
 * server rolled the transaction back instead). It is a `Submittable`, the object `pg`'s
 * `Client.query` takes besides a query (as pg-cursor does): `pg` hands it the connection when its
 * turn comes and the server's answers until ReadyForQuery.
 */
class ThenCommit {
  private failed = false
  private tag = ""
  constructor(readonly last: Last, readonly done: (error: unknown, tag: string) => void) {}
  // What `pg` records for a named statement when the server has parsed it.
  get name() {
    return this.last.name
  }
  get text() {
    return this.last.text
  }
  submit(connection: Wire) {
    const { name, text, values } = this.last
    connection.stream.cork?.()
    try {
      if (name === undefined || (connection.parsedStatements[name] === undefined && connection.submittedNamedStatements?.[name] === undefined)) {
        connection.parse({ text, name, types: [] })
        if (name !== undefined && connection.submittedNamedStatements !== undefined) connection.submittedNamedStatements[name] = text
      }
      connection.bind({ statement: name, values, valueMapper: wireValue })
      connection.execute({})
      connection.parse({ text: "COMMIT" })
      connection.bind({})
      connection.execute({})
      connection.sync()
    } finally {
      connection.stream.uncork?.()
    }
  }
  handleRowDescription() {}
  handleDataRow() {}
  handleEmptyQuery() {}
  handlePortalSuspended() {}
  handleCopyData() {}
  handleCopyInResponse(connection: Wire) {
    connection.sendCopyFail("no COPY here")
  }
  handleCommandComplete(message: { readonly text: string }) {
    this.tag = message.text
  }
  // `pg` leaves the query on its first error: the ReadyForQuery that follows is not ours.
  handleError(error: unknown) {
    this.failed = true
    this.done(error, "")
  }
  handleReadyForQuery() {
    if (!this.failed) this.done(undefined, this.tag)
  }
}

/** A transaction's connection that sends `begin` with its first statement. */
class LazyBegin implements Connection {
  begun = false
  /** The transaction's last statement, if it waits for COMMIT (`atCommit`). */
  last: Last | undefined = undefined
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
  /** COMMIT (with the last statement, if one waits) or ROLLBACK, if BEGIN was sent. */
  end(statement: "COMMIT" | "ROLLBACK") {
    const last = this.last
    this.last = undefined
    if (!this.begun) return Effect.void
    if (statement === "ROLLBACK" || last === undefined) return Effect.asVoid(this.conn.executeUnprepared(statement, [], undefined))
    const client = this.pg
    return Effect.async<void, SqlError>((resume) => {
      client.query(
        new ThenCommit(last, (error, tag) => {
          if (error !== undefined) {
            if ((error as { readonly code?: unknown }).code === "0A000") prepared.delete(last.text)
            return resume(Effect.fail(failed(error)))
          }
          resume(tag === "COMMIT" ? Effect.void : Effect.fail(new SqlError({ cause: tag, message: `COMMIT answered ${tag}` })))
        }) as unknown as Pg.QueryConfig
      )
    }).pipe(
      // A failed statement leaves the transaction open and failed: roll it back before the
      // connection goes back to the pool (after a failed COMMIT there is nothing to roll back,
      // and the server only warns).
      Effect.tapError(() => Effect.ignore(this.conn.executeUnprepared("ROLLBACK", [], undefined)))
    )
  }
}

/**
 * Keeps `statement` to send with the transaction's COMMIT, one round trip for both: true when it
 * will be (the store's own transaction, not a savepoint, BEGIN sent, plain values), false when
 * the caller must run it now. If the transaction fails before its COMMIT, the statement is dropped
 * with everything else; if the statement fails at COMMIT, the transaction fails with its error
 * and is rolled back.
 */
export const atCommit = (statement: Statement.Statement<object>): Effect.Effect<boolean> =>
  Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) => {
    if (Option.isNone(transaction)) return Effect.succeed(false)
    const [connection, depth] = transaction.value
    if (!(connection instanceof LazyBegin) || depth !== 0 || !connection.begun || connection.last !== undefined) return Effect.succeed(false)
    const [text, params] = statement.compile()
    if (!params.every(isPrimitive)) return Effect.succeed(false)
    connection.last = { name: nameOf(text), text, values: params }
    return Effect.as(logStatement(text), true)
  })

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

/** The name `text` is prepared under; undefined (unnamed) beyond the first 500 texts. */
const nameOf = (text: string): string | undefined => {
  let name = prepared.get(text)
  if (name === undefined && prepared.size < MaxPrepared) {
    name = `fair_relay_${names++}`
    prepared.set(text, name)
  }
  return name
}

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
    const name = nameOf(text)
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
