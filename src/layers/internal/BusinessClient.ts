/**
 * The client a receiver's business step is handed, inside the inbox's transaction: the store's
 * own `SqlClient`, whose statements run on that transaction's connection as they always do, but
 * without what `@effect/sql` wraps around each of them when nothing would see it. A statement run
 * through `@effect/sql` opens a `sql.execute` span, a scope and an acquirer around the
 * connection's `execute` — some 35 runtime steps; with no tracer installed that span goes nowhere,
 * and inside a transaction the acquirer answers the transaction's connection. There, this client's
 * statements call the connection's `execute` with the same text, values and row transform, in a
 * runtime step or two.
 *
 * Everything else is the client's own: its helpers, `withTransaction`, and every statement run
 * where a real tracer is installed (its spans are kept), outside a transaction, under a statement
 * transformer (`Statement.withTransformer`), or as `raw`, `values`, `stream`, `unprepared` or
 * `withoutTransform`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Context, Effect, FiberRef, Option, Tracer } from "effect"
import { globalValue } from "effect/GlobalValue"

/** The tracer every fiber has when the application installed none. */
const builtInTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/**
 * `@effect/sql`'s statement transformer (`Statement.withTransformer`), the same `FiberRef` its
 * statements read: a statement under a transformer takes `@effect/sql`'s path.
 */
const currentTransformer = globalValue("@effect/sql/Statement/currentTransformer", () => FiberRef.unsafeMake(Option.none<unknown>()))

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
      const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
      if (Option.isNone(transaction) || fiber.currentTracer !== builtInTracer || Option.isSome(fiber.getFiberRef(currentTransformer))) {
        return original.commit()
      }
      const [text, params] = original.compile()
      return transaction.value[0].execute(text, params, original.transformRows) as Effect.Effect<ReadonlyArray<A>, SqlError>
    })
  // The statement itself underneath: its fields, its other ways to run and its `compile` are its own.
  return Object.create(original, { commit: { value: commit } }) as Statement.Statement<A>
}

/** `sql` whose statements (templates and `unsafe`) run as `direct` says. */
export const make = (sql: SqlClient.SqlClient): SqlClient.SqlClient => {
  const tag = (strings: unknown, ...args: Array<unknown>) =>
    Array.isArray(strings) && "raw" in strings ? direct(sql(strings as unknown as TemplateStringsArray, ...args)) : sql(strings as string)
  const unsafe: SqlClient.SqlClient["unsafe"] = (text, params) => direct(sql.unsafe(text, params))
  return Object.assign(tag, sql, { unsafe }) as unknown as SqlClient.SqlClient
}
