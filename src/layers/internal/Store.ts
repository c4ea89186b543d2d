/**
 * What a SQL backend gives the shared queue and inbox code: a client, and transactions that
 * hold the write lock from their first statement (writes) or read one consistent state (reads).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type { MigrationError } from "@effect/sql/Migrator"
import type * as Statement from "@effect/sql/Statement"
import { unsafeFragment } from "@effect/sql/Statement"
import type { Fragment } from "@effect/sql/Statement"
import { Context, Effect, Exit, FiberRef, Option, Predicate, Schema, SchemaAST } from "effect"
import type { IncompatibleStore, InvalidInput } from "../../domain/Errors.js"

/** Why a store could not be opened. */
export type OpenError = SqlError | MigrationError | InvalidInput | IncompatibleStore

/** A store's embedded migrations, by name. */
export type Migrations = Record<string, Effect.Effect<void, SqlError, SqlClient.SqlClient>>

/** A SQL store opened by one backend. */
export interface Store {
  /** What the store's own statements are built with. */
  readonly sql: SqlClient.SqlClient
  /** The client itself: what a receiver's business step and a read's body are handed. */
  readonly client: SqlClient.SqlClient
  /** Runs `effect` in a transaction that holds the store's write lock from its start. */
  readonly write: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
  /** Runs `effect` in a transaction that sees one consistent state. */
  readonly read: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
  /**
   * Like `write`, but inside the caller's own transaction on the same client when there is one
   * (a transactional outbox: an enqueue commits with the application's rows, or not at all).
   * Absent when the store owns its client.
   */
  readonly join?: (<A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>) | undefined
  /** Optional: the database server's time in milliseconds, read inside `write`/`read` (see `PgStoreOptions.time`). */
  readonly now?: Effect.Effect<number, SqlError> | undefined
  /** Runs one of the store's own statements inside `write` or `read`, by the cheapest path the backend has. */
  readonly exec: <A extends object>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, SqlError>
}

/** One of the store's own statements, then `then` of its rows (an `Exit` from `decodeRows`, say). */
export const query = <A extends object, B, E>(
  store: Store,
  statement: Statement.Statement<A>,
  then: (rows: ReadonlyArray<A>) => Effect.Effect<B, E>
): Effect.Effect<B, E | SqlError> => Effect.flatMap(store.exec(statement), then)

const done = () => Exit.void

/** Runs a write whose result nobody reads. */
export const execWrite = (store: Store, statement: Statement.Statement<object>): Effect.Effect<void, SqlError> => query(store, statement, done)

/**
 * Why a store on the application's client refused to run: an enqueue inside a transaction that
 * cannot carry it (SQLite: one that did not take the write lock at its start, as
 * `withImmediateTransaction` does; PostgreSQL: a store with exact claims, whose enqueue would hold
 * the store-wide lock until the application commits), or an operation that needs a transaction of
 * its own called inside the application's (on SQLite's single connection it would wait for itself
 * forever).
 */
export class TransactionMisuse extends Schema.TaggedError<TransactionMisuse>()("TransactionMisuse", {
  /** The operation refused. */
  operation: Schema.String,
  message: Schema.String
}) {}

/** A text field of a failed statement's cause, as the driver gave it (`code`: its SQLSTATE or SQLite's code). */
export const causeOf = (error: SqlError, field: "code" | "message"): string | undefined =>
  Predicate.hasProperty(error.cause, field) && typeof error.cause[field] === "string" ? error.cause[field] : undefined

/** A `SqlError` caused by `TransactionMisuse`. */
export const misuse = (operation: string, message: string) =>
  Effect.fail(new SqlError({ cause: new TransactionMisuse({ operation, message }), message: `${operation}: ${message}` }))

/** Whether the caller is inside a transaction of a client (its own, for a store on the application's client). */
export const insideTransaction: Effect.Effect<boolean> = Effect.map(Effect.serviceOption(SqlClient.TransactionConnection), Option.isSome)

/**
 * `run` for an operation that needs a transaction of its own: refused (`TransactionMisuse`) inside
 * the application's transaction on a store that shares the application's client.
 */
export const alone = (run: Store["write"], operation: string): Store["write"] => (effect) =>
  Effect.flatMap(insideTransaction, (inside) =>
    inside ? misuse(operation, "this operation runs in a transaction of its own; call it outside the application's transaction") : run(effect))

/**
 * Where the SQLite store's own statements are reported, for query-plan tests and benchmarks (they
 * run without `sql.execute` spans). Nothing by default.
 */
export class StatementLog extends Context.Reference<StatementLog>()("fair-relay/StatementLog", {
  defaultValue: (): { readonly record: ((text: string) => void) | undefined } => ({ record: undefined })
}) {}

/**
 * Runs a statement on the transaction's connection directly: no span and no scope per statement
 * (the operation has its span), which makes a statement several times cheaper. Outside a
 * transaction it runs as usual.
 */
export const execOnConnection = <A extends object>(statement: Statement.Statement<A>): Effect.Effect<ReadonlyArray<A>, SqlError> =>
  Effect.withFiberRuntime((fiber) => {
    const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
    if (Option.isNone(transaction)) return statement
    const [text, params] = statement.compile()
    Context.get(fiber.currentContext, StatementLog).record?.(text)
    return transaction.value[0].execute(text, params, undefined)
  })

/**
 * The ambient transaction of another client (say, the application's own database) must never be
 * borrowed by ours: every store operation starts from a context without one.
 */
export const isolated = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  // Omitting copies the whole context: only do it when there is something to omit.
  Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (ambient) =>
    Option.isNone(ambient)
      ? effect
      : Effect.locallyWith(effect, FiberRef.currentContext, Context.omit(SqlClient.TransactionConnection)))

/**
 * `@effect/sql` turns a failed COMMIT or ROLLBACK into a defect. A database failure is an error
 * the caller must see as one, so turn it back into a typed `SqlError`.
 */
export const commitFailuresAsErrors = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  Effect.catchSomeDefect(effect, (defect) => (defect instanceof SqlError ? Option.some(Effect.fail(defect)) : Option.none()))

// The dialect questions, asked with options made once: `onDialectOrElse` with options made per
// call cost every bulk statement (its rows table) an object and two closures.
const postgresDialect = { pg: () => true, orElse: () => false }
const sqliteDialect = { sqlite: () => true, orElse: () => false }

/** Whether `sql` is a PostgreSQL client. */
export const isPostgres = (sql: SqlClient.SqlClient): boolean => sql.onDialectOrElse(postgresDialect)

/** Whether `sql` is a SQLite client. */
export const isSqlite = (sql: SqlClient.SqlClient): boolean => sql.onDialectOrElse(sqliteDialect)

/**
 * Ids compare by their bytes in every backend (SQLite's BINARY collation; PostgreSQL's "C"),
 * so the `(served, flow_id)` order is the same everywhere and agrees with `Protocol.compareIds`.
 */
export const idType = (sql: SqlClient.SqlClient) => sql.literal(isPostgres(sql) ? `TEXT COLLATE "C"` : "TEXT")

/**
 * `LIMIT n`, with n bound. SQLite's planner reads the bound value of a LIMIT that is a bare
 * parameter (`sqlite3ExprIsInteger`), which marks the statement to be prepared again whenever that
 * parameter is bound — and better-sqlite3 binds on every run, so a claim's walk would be prepared
 * again every time; the LIMIT as an expression (`+?`) is planned once. PostgreSQL keeps its
 * parameter.
 */
export const limitTo = (sql: SqlClient.SqlClient, n: number): Fragment => (isSqlite(sql) ? sql`LIMIT +${n}` : sql`LIMIT ${n}`)

/** Bound parameters one SQLite statement may carry (SQLite's limit is 32766). */
const MaxParameters = 30_000

/**
 * `rows` as a table `v` with the named columns of `table`, for one bulk statement: a `VALUES`
 * list of bound parameters on SQLite (parsing one JSON parameter per column costs several times
 * more), one JSON parameter read by `json_populate_recordset` (typed by the table) on PostgreSQL,
 * with its row count.
 */
export const rowsTable = (
  sql: SqlClient.SqlClient,
  table: string,
  columns: ReadonlyArray<string>,
  rows: ReadonlyArray<Readonly<Record<string, unknown>>>
): Fragment =>
  // On PostgreSQL the LIMIT tells the planner how many rows there are (a generic plan takes a
  // tenth of the function's rows): it takes a set-returning function for 100 rows and would join
  // them to a table of up to ~30k rows by scanning all of it.
  isPostgres(sql)
    ? sql`(SELECT * FROM json_populate_recordset(NULL::${sql(table)}, ${JSON.stringify(rows)}::json) LIMIT ${rows.length}) AS v`
    : valuesTable(columns, rows)

/**
 * The rows an `INSERT INTO table (columns)` takes: one row as plain `VALUES`, more as `rowsTable`'s
 * table `v` (`WHERE true`: SQLite's parser then takes an `ON CONFLICT` after it as the INSERT's,
 * not a join's). SQLite runs a `VALUES` table as a subquery, so one row
 * inserted from it costs more than a plain `VALUES` insert (`bench/sqlTimes.mjs` compares them).
 */
export const insertRows = (
  sql: SqlClient.SqlClient,
  table: string,
  columns: ReadonlyArray<string>,
  rows: ReadonlyArray<Readonly<Record<string, unknown>>>
): Fragment =>
  rows.length === 1
    ? sql`VALUES ${sql.in(columns.map((column) => rows[0]![column] ?? null))}`
    : sql`SELECT ${sql.literal(columns.map((column) => `v.${column}`).join(", "))} FROM ${rowsTable(sql, table, columns, rows)} WHERE true`

const valuesTable = (columns: ReadonlyArray<string>, rows: ReadonlyArray<Readonly<Record<string, unknown>>>): Fragment =>
  unsafeFragment(valuesText(columns, rows.length), valuesParams(columns, rows))

/**
 * The rows' values in column order, in a function whose loop is followed by nothing but its
 * return. A first call with a large batch (thousands of rows) gets its loop compiled while it
 * runs (on-stack replacement), before the code after the loop ever ran; V8 kept that code and
 * entered it from later calls' loops, and each time the code after the loop had no type feedback
 * it fell back to the interpreter — in one call of four to twenty of a daemon's drain
 * (`node --trace-deopt`), when the loop and the statement were one function.
 */
const valuesParams = (columns: ReadonlyArray<string>, rows: ReadonlyArray<Readonly<Record<string, unknown>>>): Array<unknown> => {
  const params: Array<unknown> = []
  for (const row of rows) for (const column of columns) params.push(row[column] ?? null)
  return params
}

// The text of a VALUES table only depends on its columns and row count: made once for each.
const valuesTexts = new Map<string, string>()
const valuesText = (columns: ReadonlyArray<string>, count: number): string => {
  const key = `${count}:${columns.join(",")}`
  let text = valuesTexts.get(key)
  if (text === undefined) {
    const tuple = `(${columns.map(() => "?").join(",")})`
    const aliases = columns.map((column, i) => `column${i + 1} AS ${column}`).join(", ")
    text = `(SELECT ${aliases} FROM (VALUES ${Array.from({ length: count }, () => tuple).join(",")})) AS v`
    if (valuesTexts.size < 1_000) valuesTexts.set(key, text)
  }
  return text
}

/** Splits `rows` so that each part fits one statement of `columns` parameters per row. */
export const chunks = <A>(rows: ReadonlyArray<A>, columns: number): ReadonlyArray<ReadonlyArray<A>> => {
  const size = Math.max(1, Math.floor(MaxParameters / columns))
  const parts: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < rows.length; i += size) parts.push(rows.slice(i, i + size))
  return parts
}

/** A SQL integer, whatever the driver returns it as (number, int8 string, bigint). */
export const SqlInt = Schema.transform(Schema.Union(Schema.Number, Schema.String, Schema.BigIntFromSelf), Schema.Number, {
  strict: true,
  decode: (value) => Number(value),
  encode: (value) => value
})

/**
 * Decodes rows this library wrote; a row that does not decode is a store we cannot trust (a
 * defect). The answer is an `Exit` — an effect that is already done: callers map and combine it
 * with `Exit`'s functions, at no runtime steps, where `Effect.map` would add some.
 */
export const decodeRows = <A, I>(schema: Schema.Schema<A, I>) => {
  // Rows decode synchronously: the Effect-returning decoder costs a fiber's worth of steps per call.
  const decode = Schema.decodeUnknownEither(Schema.Array(schema))
  const slow = (rows: ReadonlyArray<unknown>): Exit.Exit<ReadonlyArray<A>> => {
    const decoded = decode(rows)
    return decoded._tag === "Right" ? Exit.succeed(decoded.right) : Exit.die(decoded.left)
  }
  const columns = columnsOf(schema)
  if (columns === undefined) return slow
  const check = rowCheck<A>(columns)
  // `check` answers what the schema would for the rows it accepts; anything else (a malformed
  // row) goes to the schema, so the error is the schema's own.
  return (rows: ReadonlyArray<unknown>): Exit.Exit<ReadonlyArray<A>> => {
    const out: Array<A> = new Array(rows.length)
    for (let i = 0; i < rows.length; i++) {
      const row = check(rows[i])
      if (row === undefined) return slow(rows)
      out[i] = row
    }
    return Exit.succeed(out)
  }
}

/** How a column of a row is checked by `rowCheck`: the plain-JavaScript reading of its schema (`columnsOf`). */
export type ColumnKind =
  | "string" // Schema.String (and string brands)
  | "string?" // Schema.NullOr(Schema.String)
  | "int" // SqlInt
  | "int?" // Schema.NullOr(SqlInt)
  | "optional int" // Schema.optional(SqlInt)
  | "optional string?" // Schema.optional(Schema.NullOr(Schema.String))
  | ReadonlySet<string> // Schema.Literal(...)

/** Not a valid column value: the row goes to its schema. */
const invalid = Symbol("invalid")

const sqlInt = (value: unknown): number | typeof invalid =>
  typeof value === "number" ? value : typeof value === "string" || typeof value === "bigint" ? Number(value) : invalid

const readColumn = (kind: ColumnKind, value: unknown): unknown => {
  switch (kind) {
    case "string":
      return typeof value === "string" ? value : invalid
    case "string?":
    case "optional string?":
      return value === null || typeof value === "string" ? value : invalid
    case "int":
    case "optional int":
      return sqlInt(value)
    case "int?":
      return value === null ? null : sqlInt(value)
    default:
      return typeof value === "string" && kind.has(value) ? value : invalid
  }
}

/** The members of a union, nested unions flattened (`Schema.optional` wraps one in another). */
const members = (ast: SchemaAST.AST): ReadonlyArray<SchemaAST.AST> => (SchemaAST.isUnion(ast) ? ast.types.flatMap(members) : [ast])

/** The plain check of a column of type `ast` (optional or not), or undefined where only the schema can tell. */
const kindOf = (ast: SchemaAST.AST, optional: boolean): ColumnKind | undefined => {
  const types = members(ast).filter((type) => !SchemaAST.isUndefinedKeyword(type))
  const values = types.filter((type) => !(SchemaAST.isLiteral(type) && type.literal === null))
  const nullable = values.length < types.length
  const literals = values.flatMap((type) => (SchemaAST.isLiteral(type) && typeof type.literal === "string" ? [type.literal] : []))
  if (!nullable && !optional && values.length > 1 && literals.length === values.length) return new Set(literals)
  const [only] = values
  if (values.length !== 1 || only === undefined) return undefined
  const base = only === SqlInt.ast ? "int" : SchemaAST.isStringKeyword(only) ? "string" : undefined
  if (base === undefined) return undefined
  if (!optional) return nullable ? `${base}?` : base
  return base === "int" && !nullable ? "optional int" : base === "string" && nullable ? "optional string?" : undefined
}

/**
 * The plain checks of a row schema's columns, read off its AST: a `Schema.Struct` whose every
 * column is a string (brands too), a `SqlInt`, one of them nullable or optional, or a string
 * literal; undefined for any other schema (its rows are decoded by the schema alone).
 */
export const columnsOf = (schema: Schema.Schema.Any): ReadonlyArray<readonly [string, ColumnKind]> | undefined => {
  const { ast } = schema
  if (!SchemaAST.isTypeLiteral(ast) || ast.indexSignatures.length > 0) return undefined
  const columns: Array<readonly [string, ColumnKind]> = []
  for (const { isOptional, name, type } of ast.propertySignatures) {
    const kind = kindOf(type, isOptional)
    if (kind === undefined || typeof name !== "string") return undefined
    columns.push([name, kind])
  }
  return columns
}

/**
 * A row check for `decodeRows`, made once per row shape: the row's declared columns, read with
 * plain checks in the schema's column order (other columns are left out, as the schema does);
 * `undefined` when any column would need the schema to answer.
 */
export const rowCheck = <A>(columns: ReadonlyArray<readonly [string, ColumnKind]>) => (row: unknown): A | undefined => {
  if (!Predicate.isRecord(row)) return undefined
  const out: Record<string, unknown> = {}
  for (const [name, kind] of columns) {
    const value = row[name]
    if (value === undefined) {
      if ((kind === "optional int" || kind === "optional string?") && !(name in row)) continue
      return undefined
    }
    const read = readColumn(kind, value)
    if (read === invalid) return undefined
    out[name] = read
  }
  return out as A
}
