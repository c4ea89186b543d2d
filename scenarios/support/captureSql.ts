/**
 * Records the text of every SQL statement an effect executes — the store's own statements from
 * the `StatementLog`, any other from the `db.query.text` attribute of `@effect/sql`'s
 * `sql.execute` spans: what the library really sends, for query-plan tests and the benchmark.
 */
import { Effect, Tracer } from "effect"
import { StatementLog } from "../../src/layers/internal/Store.js"

/** Runs `effect` and returns its result with the SQL statements it executed, in order. */
export const captureSql = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const statements: Array<string> = []
    const native = yield* Effect.tracer
    const tracer = Tracer.make({
      span: (...args) => {
        const span = native.span(...args)
        const attribute = span.attribute.bind(span)
        span.attribute = (key, value) => {
          if (key === "db.query.text") statements.push(String(value))
          attribute(key, value)
        }
        return span
      },
      context: (f, fiber) => native.context(f, fiber)
    })
    // The store's own statements run without spans; they report to the StatementLog instead.
    const result = yield* Effect.withTracer(effect, tracer).pipe(
      Effect.provideService(StatementLog, { record: (text) => statements.push(text) })
    )
    return [result, statements] as const
  })

/**
 * Values for the parameters of a claim's candidate walk (`?` on SQLite, `$n` on PostgreSQL), for
 * replaying it: each is the limit when the text before it ends in `LIMIT` or `THEN` (a walk's
 * limit, or the limit a walk gets when some head is due), else the time.
 */
export const walkParams = (text: string, now: number, limit: number): Array<number> =>
  text.split(/\?|\$\d+/).slice(0, -1).map((before) => (/(LIMIT|THEN)\s*\+?\s*$/.test(before) ? limit : now))
