/**
 * Fewer round trips for a PostgreSQL write transaction: a write whose result nobody reads is held
 * and sent with the transaction's next statement, as a data-modifying `WITH` in front of it — a
 * claim's clock, event and flow writes reach the server as one statement instead of three.
 *
 * What makes this the same transaction as one statement at a time: every statement of a `WITH`
 * runs on one snapshot, so a held write goes with a statement only when neither reads nor changes
 * what the other changes. Held writes each change one table and read nothing else (their own
 * table, their parameters); they travel together while their tables differ. A statement that
 * declares the one table it changes and reads (`exec(statement, table)`) takes them in front when
 * that table is not theirs; any other statement (a read, a write reading other tables) is sent
 * after them, in a statement of their own. What is still held when the transaction's work ends is
 * sent with COMMIT, in one round trip (`atCommit`), or on its own before it. A held write that
 * fails fails there instead of at its call, in the same transaction, which rolls back as before.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Effect, FiberRef } from "effect"

interface Held {
  readonly table: string
  readonly statement: Statement.Statement<object>
}

/** The writes held in the current write transaction; `undefined` outside one (a write then runs at once). */
const heldWrites = FiberRef.unsafeMake<Array<Held> | undefined>(undefined)

type Run = <A extends object>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, SqlError>

/** `held` as one statement ahead of `main` (default: the last of them). */
const together = (sql: SqlClient.SqlClient, held: ReadonlyArray<Held>, main?: Statement.Statement<object>): Statement.Statement<object> => {
  const last = main ?? held[held.length - 1]!.statement
  const ahead = main === undefined ? held.slice(0, -1) : held
  return ahead.length === 0
    ? last
    : sql`WITH ${sql.csv(ahead.map((write, i) => sql`${sql.literal(`held_${i}`)} AS (${write.statement})`))} ${last}`
}

/** Sends what is held (one statement), if anything. */
const flush = (sql: SqlClient.SqlClient, run: Run, held: Array<Held> | undefined) =>
  held === undefined || held.length === 0 ? Effect.void : Effect.asVoid(run(together(sql, held.splice(0))))

/**
 * Keeps the transaction's last statement to send with its COMMIT: true when it will, false when
 * it must run now (`PgTransactions.atCommit`).
 */
type AtCommit = (statement: Statement.Statement<object>) => Effect.Effect<boolean>

/**
 * Runs the work of one write transaction holding its result-less writes; what is still held at
 * its end goes with the COMMIT when `atCommit` keeps it, else it is sent then. Each run starts
 * with nothing held (a transaction retried from its start too).
 */
export const holding = (sql: SqlClient.SqlClient, run: Run, atCommit?: AtCommit) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  Effect.suspend(() => {
    const held: Array<Held> = []
    const last = Effect.suspend(() => {
      if (held.length === 0 || atCommit === undefined) return flush(sql, run, held)
      const statement = together(sql, held.splice(0))
      return Effect.flatMap(atCommit(statement), (kept) => (kept ? Effect.void : Effect.asVoid(run(statement))))
    })
    return Effect.locally(Effect.zipLeft(effect, last), heldWrites, held)
  })

/**
 * Runs `statement`, with the held writes: in front of it when it declares `table` (the only table
 * it changes or reads) and none of them changes that table, else in a statement before it.
 */
export const exec = (sql: SqlClient.SqlClient, run: Run) => <A extends object>(statement: Statement.Statement<A>, table?: string) =>
  Effect.flatMap(FiberRef.get(heldWrites), (held): Effect.Effect<ReadonlyArray<A>, SqlError> => {
    if (held === undefined || held.length === 0) return run(statement)
    if (table !== undefined && !held.some((write) => write.table === table)) {
      return run(together(sql, held.splice(0), statement) as Statement.Statement<A>)
    }
    return Effect.zipRight(flush(sql, run, held), run(statement))
  })

/**
 * Holds a write whose result nobody reads (it changes `table` and reads nothing else) until the
 * transaction's next statement; one held write of the same table is sent first. Outside a
 * holding transaction it runs at once.
 */
export const execWrite = (sql: SqlClient.SqlClient, run: Run) => (table: string, statement: Statement.Statement<object>) =>
  Effect.flatMap(FiberRef.get(heldWrites), (held): Effect.Effect<void, SqlError> => {
    if (held === undefined) return Effect.asVoid(run(statement))
    const hold = Effect.sync(() => {
      held.push({ table, statement })
    })
    return held.some((write) => write.table === table) ? Effect.zipRight(flush(sql, run, held), hold) : hold
  })
