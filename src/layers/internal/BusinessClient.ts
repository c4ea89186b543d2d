/**
 * The client a receiver's business step is handed, inside the inbox's transaction: the store's
 * own `SqlClient`, whose statements run on that transaction's connection as they always do, but
 * without what `@effect/sql` wraps around each of them when nothing would see it. A statement run
 * through `@effect/sql` opens a `sql.execute` span, a scope and an acquirer around the
 * connection's `execute` — some 55 runtime steps on SQLite; with no tracer installed that span goes nowhere,
 * and inside a transaction the acquirer answers the transaction's connection. There, this client's
 * statements call the connection's `execute` with the same text, values and row transform, in a
 * runtime step or two.
 *
 * Its `withTransaction` inside the inbox's transaction — the savepoint the inbox puts around each
 * business step (`apply`), or one of the step's own — is `@effect/sql`'s savepoint without its
 * `sql.transaction` span: `SAVEPOINT effect_sql_<depth>`, the effect with the connection at that
 * depth (so a savepoint inside it is the next one), and `ROLLBACK TO SAVEPOINT` if it fails; in
 * some 8 runtime steps where `@effect/sql`'s take about 40.
 *
 * Everything else is the client's own: its helpers, and every statement or transaction run where
 * a real tracer is installed (its spans are kept), outside a transaction, under a statement
 * transformer (`Statement.withTransformer`), or as `raw`, `values`, `stream`, `unprepared` or
 * `withoutTransform`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Context, Effect, Exit, FiberRef, Option } from "effect"
import type { Fiber } from "effect"
import { globalValue } from "effect/GlobalValue"
import { builtInTracer } from "../../services/Metrics.js"
import { exitProviding, withTemplates } from "./Store.js"

/**
 * `@effect/sql`'s statement transformer (`Statement.withTransformer`), the same `FiberRef` its
 * statements read: a statement under a transformer takes `@effect/sql`'s path.
 */
const currentTransformer = globalValue("@effect/sql/Statement/currentTransformer", () => FiberRef.unsafeMake(Option.none<unknown>()))

/**
 * The fiber's transaction (its connection and savepoint depth) where nothing would see `@effect/sql`'s
 * span around a statement or savepoint run on it: no tracer installed. Undefined outside a transaction.
 */
const unobserved = (fiber: Fiber.RuntimeFiber<unknown, unknown>) => {
  const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
  return Option.isNone(transaction) || fiber.currentTracer !== builtInTracer ? undefined : transaction.value
}

/** The parts of `@effect/sql`'s statement that running it reads. */
interface Runnable<A> extends Statement.Statement<A> {
  readonly transformRows: (<R extends object>(rows: ReadonlyArray<R>) => ReadonlyArray<R>) | undefined
  commit(): Effect.Effect<ReadonlyArray<A>, SqlError>
}

/** `statement`, run on the transaction's connection directly where nothing would see the difference. */
const direct = <A>(statement: Statement.Statement<A>): Statement.Statement<A> => {
  const original = statement as Runnable<A>
  const commit = () =>
    Effect.withFiberRuntime((fiber): Effect.Effect<ReadonlyArray<A>, SqlError> => {
      const transaction = unobserved(fiber)
      if (transaction === undefined || Option.isSome(fiber.getFiberRef(currentTransformer))) return original.commit()
      const [text, params] = original.compile()
      return transaction[0].execute(text, params, original.transformRows) as Effect.Effect<ReadonlyArray<A>, SqlError>
    })
  // The statement itself underneath: its fields, its other ways to run and its `compile` are its own.
  return Object.create(original, { commit: { value: commit } }) as Statement.Statement<A>
}

/** `sql.withTransaction`, as a savepoint on the transaction's connection directly where nothing would see the difference. */
const savepoints = (sql: SqlClient.SqlClient) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  Effect.withFiberRuntime<A, E | SqlError, R>((fiber) => {
    const transaction = unobserved(fiber)
    if (transaction === undefined) return sql.withTransaction(effect)
    const [connection, depth] = transaction
    const name = `effect_sql_${depth + 1}`
    const inside = exitProviding(SqlClient.TransactionConnection, [connection, depth + 1] as const)
    // As `@effect/sql` does: a savepoint that cannot be rolled back to is a defect.
    const rollback = Effect.orDie(connection.execute(`ROLLBACK TO SAVEPOINT ${name}`, [], undefined))
    return Effect.uninterruptibleMask((restore) =>
      Effect.zipRight(
        connection.execute(`SAVEPOINT ${name}`, [], undefined),
        Effect.flatMap(inside(restore, effect), (exit) => (Exit.isSuccess(exit) ? exit : Effect.zipRight(rollback, exit)))
      )
    )
  })

/** `sql` whose statements (templates and `unsafe`) and transactions run as `direct` and `savepoints` say. */
export const make = (sql: SqlClient.SqlClient): SqlClient.SqlClient => {
  const unsafe: SqlClient.SqlClient["unsafe"] = (text, params) => direct(sql.unsafe(text, params))
  return withTemplates(sql, (strings, args) => direct(sql(strings, ...args)), { unsafe, withTransaction: savepoints(sql) })
}
