/**
 * PostgreSQL transactions in as few round trips as their statements allow. A store's transaction
 * sends its statements in batches (`Batch`): each statement parsed (once per connection: a named
 * prepared statement; or in every batch, unnamed, with `PreparedStatements` false), bound and
 * executed, then one Sync — one round trip for the whole batch.
 *
 * - BEGIN and what the transaction needs before its first statement (isolation, lock timeout,
 *   plan choice, the store's lock) are not sent on their own: they lead its first batch.
 * - Statements whose answers are not needed yet (`PgHeldWrites`: writes nobody reads, a read
 *   started early) wait for the next statement whose answer is needed and go in its batch, in
 *   their order; what still waits at the end goes with COMMIT. A transaction that ran nothing
 *   sends neither BEGIN nor COMMIT.
 *
 * The server runs a batch's statements one after the other, each seeing what those before it did
 * (each takes its own snapshot, READ COMMITTED: the statement after the lock reads what the lock's
 * previous holder committed). At the first that fails it skips the rest, up to the Sync: the batch
 * fails from that statement on, and the transaction is rolled back.
 */
import { SqlError } from "@effect/sql/SqlError"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type * as Statement from "@effect/sql/Statement"
import { Context, Effect, Exit, Fiber, Option, Scope, Stream } from "effect"
import { createHash } from "node:crypto"
import pg from "pg"
import type * as Pg from "pg"
import type { CompileWhole } from "./CompiledOnce.js"
import { execOnConnection, exitProviding, StatementLog } from "./Store.js"
import { PooledConnection } from "./PgPool.js"
import type { Reserver } from "./PgPool.js"
import * as TextMap from "./TextMap.js"

/** A statement's parameter as it is sent: its text, its bytes, or null. */
export type Parameter = string | Buffer | null

/**
 * `value` as a parameter, as `pg` sends it with its own queries: text of a string, number, bigint
 * or boolean; null of null and undefined; the bytes of a `Buffer` or typed array; a date in ISO
 * form with its offset (local time, or UTC with `pg.defaults.parseInputDatesAsUTC`); an array as a
 * PostgreSQL array literal; any other object as JSON.
 */
export const toParameter = (value: unknown): Parameter => {
  switch (typeof value) {
    case "string":
      return value
    case "undefined":
      return null
    case "object": {
      if (value === null) return null
      if (Buffer.isBuffer(value)) return value
      if (ArrayBuffer.isView(value)) return Buffer.from(value.buffer, value.byteOffset, value.byteLength)
      if (value instanceof Date) return dateText(value)
      if (Array.isArray(value)) return arrayText(value)
      return JSON.stringify(value)
    }
    default:
      return String(value)
  }
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0")

/** A date as `pg` writes it: year (a year before 1 as BC), time to the millisecond, offset. */
const dateText = (date: Date): string => {
  const utc = pg.defaults.parseInputDatesAsUTC === true
  let year = utc ? date.getUTCFullYear() : date.getFullYear()
  const bc = year < 1
  if (bc) year = Math.abs(year) + 1
  const [month, day, hours, minutes, seconds, millis] = utc
    ? [date.getUTCMonth(), date.getUTCDate(), date.getUTCHours(), date.getUTCMinutes(), date.getUTCSeconds(), date.getUTCMilliseconds()]
    : [date.getMonth(), date.getDate(), date.getHours(), date.getMinutes(), date.getSeconds(), date.getMilliseconds()]
  const offset = utc ? 0 : -date.getTimezoneOffset()
  const zone = `${offset < 0 ? "-" : "+"}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`
  return `${pad(year, 4)}-${pad(month + 1)}-${pad(day)}T${pad(hours)}:${pad(minutes)}:${pad(seconds)}.${pad(millis, 3)}${zone}${bc ? " BC" : ""}`
}

/** An array as a PostgreSQL array literal: each element quoted (a nested array as an array, bytes as `\x` hex, null as NULL). */
const arrayText = (values: ReadonlyArray<unknown>): string => {
  let text = "{"
  for (let i = 0; i < values.length; i++) {
    if (i > 0) text += ","
    const value = values[i]
    if (value === null || value === undefined) text += "NULL"
    else if (Array.isArray(value)) text += arrayText(value)
    else if (ArrayBuffer.isView(value)) text += "\\\\x" + Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex")
    else text += `"${String(toParameter(value)).replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`
  }
  return text + "}"
}

/**
 * The name `text` is prepared under, the same in every process: a digest of the text (and of how
 * many times a change of its tables made this process prepare it afresh). A name never stands for
 * two texts, so processes whose statements reach one server connection (through a pooler) cannot
 * run each other's statements under a name they both use.
 */
export const statementName = (text: string, renewed = 0): string =>
  `fair_relay_${createHash("sha256").update(text).digest("hex").slice(0, 32)}${renewed === 0 ? "" : `_${renewed}`}`

// Statement texts and the names they are prepared under (one name per text, for every connection),
// and how many times each was prepared afresh.
const prepared = TextMap.make<string>()
const renewals = new Map<string, number>()
const MaxPrepared = 500

/** The name `text` is prepared under; undefined (unnamed) beyond the first 500 texts. */
const nameOf = (text: string): string | undefined => {
  let name = prepared.get(text)
  if (name === undefined && prepared.size() < MaxPrepared) {
    name = statementName(text, renewals.get(text))
    prepared.set(text, name)
  }
  return name
}

/**
 * Whether the store's statements go as named prepared statements (parsed once per connection;
 * the default) or unnamed, parsed in every batch that runs them — for a pooler that hands each
 * transaction a different server connection and does not carry prepared statements across them.
 */
export class PreparedStatements extends Context.Reference<PreparedStatements>()("fair-relay/PreparedStatements", {
  defaultValue: (): boolean => true
}) {}

/** `statement` sent without a name: parsed in the batch that runs it (`preparedStatements: false`). */
const unnamed = (statement: Wired): Wired => (statement.name === undefined ? statement : { ...statement, name: undefined })

/** A statement ready to send. */
export interface Wired {
  /** Its prepared statement's name; none beyond the first 500 texts (run unnamed). */
  readonly name: string | undefined
  readonly text: string
  readonly values: Array<Parameter>
  /** Whether its rows are wanted (a write nobody reads is executed without describing them). */
  readonly rows: boolean
  /** The statement, to run it as `@effect/sql` does outside a transaction. */
  readonly statement?: Statement.Statement<object> | undefined
}

/** `statement` ready to send, compiled by `compile` (its client's: `CompiledOnce.make`); `rows`: its rows are wanted. */
export const wired = (compile: CompileWhole, statement: Statement.Statement<object>, rows: boolean): Wired => {
  const [text, values] = compile(statement)
  return { name: nameOf(text), text, values: values.map(toParameter), rows, statement }
}

const control = (text: string): Wired => ({ name: nameOf(text), text, values: [], rows: false })

const Commit = control("COMMIT")

interface Field {
  readonly name: string
  readonly dataTypeID: number
}

/** How a client reads a column of a type (`pg`'s `client.getTypeParser`: the pool's `types`, or `pg.types`). */
type TypeParsers = Pick<Pg.ClientBase, "getTypeParser">

/** The columns of a prepared statement's rows: their names and how each is read. */
interface Description {
  readonly fields: ReadonlyArray<string>
  readonly parsers: ReadonlyArray<(value: string) => unknown>
  /**
   * A row of every field, each null: a row is a copy of it with its values set — one shape for
   * every row of the statement, where a row made field by field makes its shape afresh each time.
   */
  readonly empty: Readonly<Record<string, unknown>>
}

const descriptionOf = (fields: ReadonlyArray<string>, parsers: ReadonlyArray<(value: string) => unknown>): Description => ({
  fields,
  parsers,
  empty: Object.fromEntries(fields.map((field) => [field, null]))
})

/** The type of a `bigint` column. */
const Int8 = 20

/**
 * A `bigint` column of the store's own rows as the number the rows' decoders make of it (`SqlInt`:
 * `Number` of its text), read digit by digit, where `pg`'s own reading tests each text against a
 * regular expression and hands it on for the decoders to convert: most of the store's columns are
 * `bigint`, so this parse runs for most values of the rows the store reads on its hot path.
 * Exact up to 15 digits (below 2^53);
 * longer texts go to `Number`.
 */
export const int8 = (text: string): number => {
  const length = text.length
  if (length > 15) return Number(text)
  const negative = text.charCodeAt(0) === 45
  let value = 0
  for (let i = negative ? 1 : 0; i < length; i++) {
    const digit = text.charCodeAt(i) - 48
    if (digit < 0 || digit > 9) return Number(text)
    value = value * 10 + digit
  }
  return negative ? -value : value
}

/** What a batch holds before any of its statements' rows are described. */
const undescribed = descriptionOf([], [])

/**
 * What a connection has prepared: the names of its prepared statements (recorded as the server
 * confirms each, ParseComplete), and the descriptions of their rows, by name — a named statement
 * is parsed once per connection, and its rows described once (its first Describe), not in every
 * batch. A statement whose result would change (a migrated table) fails at the server (0A000) and
 * is prepared afresh under a new name, described again.
 */
interface Prepared {
  readonly parsed: Set<string>
  readonly described: Map<string, Description>
}

const preparedOn = new WeakMap<Pg.Connection, Prepared>()

/** Why a batch failed: the server's error, and the index of the statement it failed at. */
interface Failure {
  readonly error: unknown
  readonly at: number
}

/**
 * Statements as one round trip: each parsed if this connection has not prepared it yet, bound,
 * described when its rows are wanted, executed; then one Sync. The answer is every statement's
 * rows (empty for one whose rows were not wanted) and the last command tag, or the server's error
 * and the statement it failed at. It is a `Submittable`, the object `pg`'s `Client.query` takes
 * besides a query (as pg-cursor does): `pg` hands it the connection when its turn comes and the
 * server's answers until ReadyForQuery; the batch writes its messages with the connection's
 * public methods (`parse`, `bind`, `describe`, `execute`, `sync`: those pg-cursor writes with).
 * The batch records each statement it prepared when the server confirms it (ParseComplete), so a
 * batch that fails leaves the connection's record (`Prepared`) exact. A statement's rows are described (Describe, its
 * RowDescription) only where the connection has no description of its name yet.
 */
class Batch implements Pg.Submittable {
  private answers: Array<ReadonlyArray<object>> = []
  private description: Description = undescribed
  // The statement whose rows `description` describes (-1: none yet).
  private described = -1
  private known: Map<string, Description> | undefined
  private rows: Array<object> = []
  private tag = ""
  private failed = false
  private parsing: Array<Wired> = []
  private parsed = 0
  private connection: Pg.Connection | undefined
  private prepared: Prepared | undefined
  constructor(
    private statements: ReadonlyArray<Wired>,
    readonly types: TypeParsers,
    private done: (failure: Failure | undefined, answers: ReadonlyArray<ReadonlyArray<object>>, tag: string) => void
  ) {}
  private readonly onParsed = () => {
    const statement = this.parsing[this.parsed++]
    if (statement?.name !== undefined) this.prepared?.parsed.add(statement.name)
  }
  submit(connection: Pg.Connection) {
    this.connection = connection
    let prepared = preparedOn.get(connection)
    if (prepared === undefined) preparedOn.set(connection, prepared = { parsed: new Set(), described: new Map() })
    this.prepared = prepared
    const known = this.known = prepared.described
    const parsing = new Set<string>()
    connection.stream.cork()
    try {
      for (const statement of this.statements) {
        const { name, text, values } = statement
        if (name === undefined || (!prepared.parsed.has(name) && !parsing.has(name))) {
          connection.parse({ text, name: name ?? "", types: [] }, true)
          this.parsing.push(statement)
          if (name !== undefined) parsing.add(name)
        }
        connection.bind({ statement: name ?? "", values }, true)
        if (statement.rows && (name === undefined || !known.has(name))) connection.describe({ type: "P", name: "" }, true)
        connection.execute({}, true)
      }
      connection.sync()
    } finally {
      connection.stream.uncork()
    }
    if (this.parsing.length > 0) connection.on("parseComplete", this.onParsed)
  }
  private finish() {
    if (this.parsing.length > 0) this.connection?.off("parseComplete", this.onParsed)
  }
  handleRowDescription(message: { readonly fields: ReadonlyArray<Field> }) {
    this.description = descriptionOf(
      message.fields.map((field) => field.name),
      // Every column comes as text (a batch asks for no binary results).
      message.fields.map((field) => (field.dataTypeID === Int8 ? int8 : this.types.getTypeParser(field.dataTypeID, "text")))
    )
    this.described = this.answers.length
    const name = this.statements[this.described]?.name
    if (name !== undefined) this.known?.set(name, this.description)
  }
  handleDataRow(message: { readonly fields: ReadonlyArray<string | null> }) {
    const at = this.answers.length
    const statement = this.statements[at]
    if (this.failed || !statement?.rows) return
    if (this.described !== at) {
      const description = statement.name === undefined ? undefined : this.known?.get(statement.name)
      if (description === undefined) return this.handleError(new Error(`rows of a statement not described: ${statement.text}`))
      this.description = description
      this.described = at
    }
    const { empty, fields, parsers } = this.description
    const row: Record<string, unknown> = { ...empty }
    for (let i = 0; i < message.fields.length; i++) {
      const value = message.fields[i]!
      row[fields[i]!] = value === null ? null : parsers[i]!(value)
    }
    this.rows.push(row)
  }
  handleCommandComplete(message: { readonly text: string }) {
    this.tag = message.text
    this.answers.push(this.rows)
    this.rows = []
  }
  handleEmptyQuery() {
    this.answers.push([])
  }
  handlePortalSuspended() {}
  handleCopyData() {}
  /**
   * A store's statements never copy from the client; should one, the connection is ended (the
   * server waits for the copy's data), which fails the batch, and the pool discards the client.
   */
  handleCopyInResponse(connection: Pg.Connection) {
    connection.end()
  }
  // `pg` leaves the query on its first error: the ReadyForQuery that follows is not ours.
  handleError(error: unknown) {
    this.failed = true
    this.finish()
    this.answered({ error, at: this.answers.length }, "")
  }
  handleReadyForQuery() {
    if (this.failed) return
    this.finish()
    this.answered(undefined, this.tag)
  }
  /**
   * Hands the answers over, and lets go of everything the batch held: `pg` keeps a finished batch
   * referenced, which would keep its statements, rows and the caller's callback alive past the
   * young generation's collections.
   */
  private answered(failure: Failure | undefined, tag: string) {
    const { answers, done } = this
    this.statements = []
    this.answers = []
    this.rows = []
    this.parsing = []
    this.known = undefined
    this.prepared = undefined
    this.connection = undefined
    this.done = ignoreAnswers
    done(failure, answers, tag)
  }
}

const ignoreAnswers = () => {}

const failed = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

/** A fiber, whatever it answers. */
export type AnyFiber = Fiber.RuntimeFiber<unknown, unknown>

/** What a round trip sends and who hears its outcome (see `send`). */
interface Request<A> {
  readonly statements: ReadonlyArray<Wired>
  readonly context: Context.Context<never>
  readonly sent: ((answers: ReadonlyArray<ReadonlyArray<object>> | undefined, failure: SqlError | undefined) => void) | undefined
  readonly answer: (answers: ReadonlyArray<ReadonlyArray<object>>, tag: string) => A
}

/**
 * A client's one round-trip effect, made once and run for every batch it sends; each batch's
 * request waits in `pending` under the fiber that sends it, which the effect reads as it starts
 * (fibers sharing one client — statements run side by side in one transaction — each find their
 * own; an entry whose fiber was interrupted before the effect started goes with the fiber).
 *
 * Not an `Effect.async` made afresh for each batch where the batch is in scope: a fiber waiting in
 * such a wait keeps what it holds alive past the young generation's collections until a full
 * one; a wait made once does not.
 */
interface RoundTrip {
  readonly pending: WeakMap<Fiber.RuntimeFiber<unknown, unknown>, Request<unknown>>
  readonly effect: Effect.Effect<unknown, SqlError>
}

const roundTrips = new WeakMap<Pg.ClientBase, RoundTrip>()

const roundTripOf = (client: Pg.ClientBase): RoundTrip => {
  const known = roundTrips.get(client)
  if (known !== undefined) return known
  const pending: RoundTrip["pending"] = new WeakMap()
  const effect = Effect.async<unknown, SqlError>((resume) => {
    const fiber = Option.getOrThrow(Fiber.getCurrentFiber())
    const { answer, context, sent, statements } = pending.get(fiber)!
    pending.delete(fiber)
    const log = Context.get(context, StatementLog)
    if (log.roundTrip !== undefined) log.roundTrip(statements.map((s) => s.text))
    client.query(
      new Batch(Context.get(context, PreparedStatements) ? statements : statements.map(unnamed), client, (failure, answers, tag) => {
        if (failure === undefined) {
          sent?.(answers, undefined)
          return resume(Effect.succeed(answer(answers, tag)))
        }
        // A table changed under a prepared statement (another process migrated the store): the
        // statement fails once, and its text is prepared afresh under a new name next time.
        if ((failure.error as { readonly code?: unknown }).code === "0A000") {
          const statement = statements[failure.at]
          if (statement !== undefined) {
            prepared.delete(statement.text)
            renewals.set(statement.text, (renewals.get(statement.text) ?? 0) + 1)
          }
        }
        const error = failed(failure.error)
        sent?.(undefined, error)
        resume(Effect.fail(error))
      })
    )
  })
  const trip: RoundTrip = { pending, effect }
  roundTrips.set(client, trip)
  return trip
}

/**
 * Sends `statements` in one round trip on `client`, for `fiber` (the fiber that runs the answer,
 * in whose runtime step this is called: the step that has the fiber at hand sends, with no step of
 * its own); `sent` hears the outcome first (statements held by a caller take their answers there).
 * Reports the round trip to the fiber's `StatementLog`, if it listens. Succeeds with `answer` of
 * the statements' rows and the last command's tag.
 */
const send = <A>(
  fiber: AnyFiber,
  client: Pg.ClientBase,
  statements: ReadonlyArray<Wired>,
  sent: Request<A>["sent"],
  answer: Request<A>["answer"]
): Effect.Effect<A, SqlError> => {
  const trip = roundTripOf(client)
  trip.pending.set(fiber, { statements, context: fiber.currentContext, sent, answer })
  return trip.effect as Effect.Effect<A, SqlError>
}

/** A statement a transaction holds until it sends its next batch (`PgHeldWrites`), and once sent, its answer. */
export interface Held {
  readonly statement: Wired
  answer?: ReadonlyArray<object>
  failure?: SqlError
}

/**
 * A transaction's connection that sends `begin` in front of its first batch, and holds the
 * statements whose answers wait (`held`, in a transaction that holds them): what is still held
 * when its work ends goes with the COMMIT, one round trip for all, or is dropped with everything
 * else if it rolls back.
 */
class LazyBegin implements Connection {
  begun = false
  constructor(
    readonly conn: PooledConnection,
    readonly begin: ReadonlyArray<Wired>,
    readonly held: Array<Held> | undefined
  ) {}
  /** BEGIN and the rest of `begin`, if not sent yet (a statement run through `@effect/sql`). */
  readonly ensure = Effect.withFiberRuntime<unknown, SqlError>((fiber) => {
    if (this.begun) return Effect.void
    this.begun = true
    return send(fiber, this.pg, this.begin, undefined, () => undefined)
  })
  get pg() {
    return this.conn.pg
  }
  /** `statements` with BEGIN in front of them if it was not sent yet. */
  lead(statements: ReadonlyArray<Wired>): ReadonlyArray<Wired> {
    if (this.begun) return statements
    this.begun = true
    return [...this.begin, ...statements]
  }
  readonly execute: Connection["execute"] = (sql, params, transform) => Effect.zipRight(this.ensure, this.conn.execute(sql, params, transform))
  readonly executeRaw: Connection["executeRaw"] = (sql, params) => Effect.zipRight(this.ensure, this.conn.executeRaw(sql, params))
  readonly executeValues: Connection["executeValues"] = (sql, params) => Effect.zipRight(this.ensure, this.conn.executeValues(sql, params))
  readonly executeUnprepared: Connection["executeUnprepared"] = (sql, params, transform) =>
    Effect.zipRight(this.ensure, this.conn.executeUnprepared(sql, params, transform))
  readonly executeStream: Connection["executeStream"] = (sql, params, transform) =>
    Stream.unwrap(Effect.as(this.ensure, this.conn.executeStream(sql, params, transform)))
  /**
   * COMMIT (with what is still held, and BEGIN if only that much ran) or ROLLBACK, if BEGIN was
   * sent; answers how it went. A held statement that fails at COMMIT fails the transaction with
   * its error.
   */
  end(statement: "COMMIT" | "ROLLBACK"): Effect.Effect<Exit.Exit<void, SqlError>> {
    const last = this.held === undefined ? [] : this.held.splice(0).map((h) => h.statement)
    const rollback = () => Effect.asVoid(this.conn.executeUnprepared("ROLLBACK", [], undefined))
    if (statement === "ROLLBACK" || (!this.begun && last.length === 0)) {
      return this.begun ? Effect.exit(rollback()) : endedWithoutBegin
    }
    // A failed statement leaves the transaction open and failed: roll it back before the
    // connection goes back to the pool (after a failed COMMIT there is nothing to roll back, and
    // the server only warns).
    const rolledBack = (failed: Exit.Exit<void, SqlError>) => Effect.as(Effect.ignore(rollback()), failed)
    return Effect.matchCauseEffect(
      Effect.withFiberRuntime<Exit.Exit<void, SqlError>, SqlError>((fiber) => {
        const log = Context.get(fiber.currentContext, StatementLog)
        if (log.record !== undefined) for (const s of last) log.record(s.text)
        return send(fiber, this.pg, this.lead([...last, Commit]), undefined, (_, tag) =>
          tag === "COMMIT" ? Exit.void : Exit.fail(new SqlError({ cause: tag, message: `COMMIT answered ${tag}` })))
      }),
      {
        onFailure: (cause) => rolledBack(Exit.failCause(cause)),
        onSuccess: (committed) => (Exit.isSuccess(committed) ? Effect.succeed(committed) : rolledBack(committed))
      }
    )
  }
}

/** How a transaction that sent nothing ends: with nothing to send. */
const endedWithoutBegin: Effect.Effect<Exit.Exit<void, SqlError>> = Effect.succeed(Exit.void)

/**
 * What the store's transaction in `context` holds (`PgHeldWrites`): undefined outside one, or in
 * one that holds nothing (a read).
 */
export const heldIn = (context: Context.Context<never>): Array<Held> | undefined => {
  const transaction = Context.getOption(context, SqlClient.TransactionConnection)
  return Option.isSome(transaction) && transaction.value[0] instanceof LazyBegin ? transaction.value[0].held : undefined
}

/**
 * Sends `statements` in one round trip on the transaction's connection of `fiber` — with BEGIN in
 * front of them if it was not sent yet — and answers each one's rows (`sent` hears them first);
 * called in a runtime step of `fiber` (see `send`). Outside a transaction (or on a connection that
 * is not the store's own) each runs as usual, one after the other. Succeeds with `pick` of those rows
 * (default: all of them), taken as the answer arrives.
 */
export const sendAll = <A = ReadonlyArray<ReadonlyArray<object>>>(
  fiber: AnyFiber,
  statements: ReadonlyArray<Wired>,
  sent?: (answers: ReadonlyArray<ReadonlyArray<object>> | undefined, failure: SqlError | undefined) => void,
  pick: (answers: ReadonlyArray<ReadonlyArray<object>>) => A = (answers) => answers as A
): Effect.Effect<A, SqlError> => {
  const context = fiber.currentContext
  const transaction = Context.getOption(context, SqlClient.TransactionConnection)
  const connection = Option.isSome(transaction) ? transaction.value[0] : undefined
  // Only the store's own connections are sent batches: the application's transaction (an enqueue
  // in its outbox) runs on its client's connection, whose `pg` client is not public.
  const client = connection instanceof LazyBegin || connection instanceof PooledConnection ? connection.pg : undefined
  if (connection === undefined || client === undefined) {
    return Effect.forEach(statements, (s) => (s.statement === undefined ? Effect.succeed([]) : execOnConnection(s.statement))).pipe(
      Effect.tap((answers) => Effect.sync(() => sent?.(answers, undefined))),
      Effect.tapError((failure) => Effect.sync(() => sent?.(undefined, failure))),
      Effect.map(pick)
    )
  }
  const log = Context.get(context, StatementLog)
  if (log.record !== undefined) for (const s of statements) log.record(s.text)
  const batch = connection instanceof LazyBegin ? connection.lead(statements) : statements
  // The answers of `statements`, without those of BEGIN and what leads it.
  const own = (answers: ReadonlyArray<ReadonlyArray<object>>) => (batch === statements ? answers : answers.slice(batch.length - statements.length))
  return send(
    fiber,
    client,
    batch,
    sent === undefined ? undefined : (answers, failure) => sent(answers === undefined ? undefined : own(answers), failure),
    (answers) => pick(own(answers))
  )
}

/**
 * Transactions on `sql` that open with `begin` (BEGIN and what the transaction needs before its
 * first statement: its isolation, lock timeout, the store's lock; no parameters), sent with its
 * first batch: a connection of the pool for the transaction, its `TransactionConnection` in the
 * body's context, COMMIT or ROLLBACK at its end (a failed COMMIT or ROLLBACK is a `SqlError`, the
 * transaction's outcome), the connection back to the pool. What `sql.withTransaction` does, in
 * fewer runtime steps: the context is swapped by `exitProviding` rather than by `Effect.locally`,
 * and no span is made (the operation has its own), work `@effect/sql`'s does before the
 * transaction's first statement. The store's transactions are
 * never nested, so there are no savepoints: our `TransactionConnection` replaces any the caller's
 * context holds (the application's own transaction, on another client, is never borrowed — what
 * `Store.isolated` does for the SQLite store, without another runtime step or two). With `holds`,
 * the transaction holds the statements whose answers wait (`PgHeldWrites`) until its next batch,
 * at the latest its COMMIT. With a `reserver` (a store that owns its pool, `PgPool`) the
 * connection is taken from the pool and given back by hand; without, through `sql.reserve`.
 */
export const transactions = (
  sql: SqlClient.SqlClient,
  begin: ReadonlyArray<string>,
  options: { readonly holds?: boolean; readonly reserver?: Reserver | undefined } = {}
) => {
  const leading = begin.map(control)
  const held = () => (options.holds === true ? [] : undefined)
  // The body with `conn` as its transaction's connection, then COMMIT or ROLLBACK, and `then` of the outcome.
  const onConnection = <A, E, R>(
    restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>,
    effect: Effect.Effect<A, E, R>,
    conn: LazyBegin,
    then: (outcome: Exit.Exit<A, E | SqlError>) => Effect.Effect<A, E | SqlError>
  ) =>
    // Every way out of the body (success, failure, defect, interruption) comes through here.
    Effect.flatMap(exitProviding(SqlClient.TransactionConnection, [conn, 0] as const)(restore, effect), (exit) =>
      Effect.flatMap(conn.end(Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK"), (ended) =>
        then(Exit.isFailure(ended) ? Exit.failCause(ended.cause) : exit)))
  const { reserver } = options
  if (reserver !== undefined) {
    // The pool's connection taken and given back by hand. Waited for uninterruptibly: the wait
    // has no canceller, so a connection handed over after an interruption would never go back.
    return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(reserver.acquire, (reserved) =>
          onConnection(restore, effect, new LazyBegin(reserved, leading, held()), (outcome) => {
            reserver.release(reserved)
            return outcome
          })))
  }
  // `sql.reserve` hands the pool's connection back when the scope in its context closes.
  const reserve = sql.reserve as Effect.Effect<Connection, SqlError, Scope.Scope>
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Scope.make(), (scope) =>
        // Waited for uninterruptibly, as `makeWithTransaction` did (see above).
        Effect.flatMap(exitProviding(Scope.Scope, scope)((self) => self, reserve), (reserved) => {
          if (Exit.isFailure(reserved)) return Effect.zipRight(Scope.close(scope, reserved), Exit.failCause(reserved.cause))
          const conn = new LazyBegin(reserved.value as PooledConnection, leading, held())
          return onConnection(restore, effect, conn, (outcome) => Effect.zipRight(Scope.close(scope, outcome), outcome))
        }))
    )
}
