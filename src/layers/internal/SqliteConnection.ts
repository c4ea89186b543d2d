/**
 * One SQLite connection as an `@effect/sql` `SqlClient` (what migrations and a receiver's
 * business step use) that also keeps its better-sqlite3 handle, so the store's own statements can
 * run synchronously on it: a statement through `SqlClient` costs a span, a scope, a cache lookup
 * and a fiber's worth of effects; on the handle it costs a `Map` lookup and the SQLite call.
 * The same lock guards both, so they never interleave.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import Database from "better-sqlite3"
import { Effect, Scope, Stream } from "effect"
import * as TextMap from "./TextMap.js"

/** A SQLite connection: the `SqlClient` over it and its raw handle. */
export interface SqliteConnection {
  readonly sql: SqlClient.SqlClient
  /** Runs a statement synchronously on the handle; call only while holding the connection. */
  readonly run: (text: string, params: ReadonlyArray<unknown>) => ReadonlyArray<object>
  /** The connection as `@effect/sql` sees it (what a transaction provides as its `TransactionConnection`). */
  readonly connection: Connection
  /** The one permit that guards the connection: whoever holds it may use `run` and `connection`. */
  readonly lock: ConnectionLock
}

/**
 * The connection's one permit. Where it is free — nearly always, on a connection one store owns —
 * taking it is one step and giving it back is a plain call, where an `Effect.Semaphore` runs
 * effects for both; a transaction takes it once per operation.
 */
export interface ConnectionLock {
  /**
   * Takes the permit; call it where interruption is masked and pass the mask's `restore`: only
   * the wait for another holder is interruptible, so the permit is never taken by a fiber that
   * is then interrupted before it can give it back.
   */
  readonly take: (restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>) => Effect.Effect<void>
  /** Takes the permit if it is free, at once (true); call it where interruption is masked. */
  readonly unsafeTryTake: () => boolean
  /** Gives the permit back; only its holder calls this, exactly once. */
  readonly unsafeRelease: () => void
}

/**
 * A fiber that finds the permit taken waits; a release wakes every waiter and each takes the permit
 * only if it is still free when it runs (the others wait again), so a waiter interrupted after
 * being woken cannot strand the rest — as `Effect.Semaphore` does it.
 */
export const makeLock = (): ConnectionLock => {
  let held = false
  const waiters = new Set<() => void>()
  const wait = Effect.async<void>((resume) => {
    const wake = () => {
      waiters.delete(wake)
      resume(Effect.void)
    }
    waiters.add(wake)
    return Effect.sync(() => waiters.delete(wake))
  })
  const unsafeTryTake = () => {
    if (held) return false
    held = true
    return true
  }
  const take: ConnectionLock["take"] = (restore) =>
    Effect.suspend(() => (unsafeTryTake() ? Effect.void : Effect.zipRight(restore(wait), take(restore))))
  const unsafeRelease = () => {
    held = false
    for (const wake of [...waiters]) wake()
  }
  return { take, unsafeTryTake, unsafeRelease }
}

/** Most prepared statements kept (least recently used are dropped). */
const PreparedCacheSize = 200

const failed = (cause: unknown, message: string) => new SqlError({ cause, message })

/** Opens `filename` (WAL unless `readonly`) for the lifetime of the scope. */
export const make = (filename: string, options: { readonly readonly?: boolean } = {}) =>
  Effect.gen(function*() {
    const db = new Database(filename, { readonly: options.readonly ?? false })
    yield* Effect.addFinalizer(() => Effect.sync(() => db.close()))
    if (options.readonly !== true) db.pragma("journal_mode = WAL")

    // Prepared statements by text, the least recently used dropped past `PreparedCacheSize`.
    const prepared = TextMap.make<{ readonly statement: Database.Statement<Array<unknown>, object>; used: number }>()
    let uses = 0
    const leastRecentlyUsed = (): string => {
      let oldest: readonly [string, { readonly used: number }] | undefined
      for (const entry of prepared.entries()) if (oldest === undefined || entry[1].used < oldest[1].used) oldest = entry
      return oldest![0]
    }
    // Rows are objects (arrays in raw mode): what a statement that returns data answers.
    const prepare = (text: string): Database.Statement<Array<unknown>, object> => {
      const cached = prepared.get(text)
      if (cached !== undefined) {
        cached.used = ++uses
        return cached.statement
      }
      const statement = db.prepare<Array<unknown>, object>(text)
      if (prepared.size() >= PreparedCacheSize) prepared.delete(leastRecentlyUsed())
      prepared.set(text, { statement, used: ++uses })
      return statement
    }
    const run = (text: string, params: ReadonlyArray<unknown>): ReadonlyArray<object> => {
      const statement = prepare(text)
      if (statement.reader) return statement.all(...params)
      statement.run(...params)
      return []
    }
    const attempt = <A>(f: () => A, message: string) =>
      Effect.try({ try: f, catch: (cause) => failed(cause, message) })

    const connection: Connection = {
      execute: (text, params, transformRows) =>
        attempt(() => {
          const rows = run(text, params)
          return transformRows ? transformRows(rows) : rows
        }, "Failed to execute statement"),
      executeRaw: (text, params) =>
        attempt(() => {
          const statement = prepare(text)
          return statement.reader ? statement.all(...params) : statement.run(...params)
        }, "Failed to execute statement"),
      executeValues: (text, params) =>
        attempt(() => {
          const statement = prepare(text)
          if (!statement.reader) {
            statement.run(...params)
            return []
          }
          return statement.raw(true).all(...params).filter(Array.isArray)
        }, "Failed to execute statement").pipe(Effect.ensuring(Effect.sync(() => {
          const statement = prepared.get(text)?.statement
          if (statement?.reader) statement.raw(false)
        }))),
      executeUnprepared: (text, params, transformRows) =>
        attempt(() => {
          const statement = db.prepare<Array<unknown>, object>(text)
          const rows = statement.reader ? statement.all(...(params ?? [])) : (statement.run(...(params ?? [])), [])
          return transformRows ? transformRows(rows) : rows
        }, "Failed to execute statement"),
      executeStream: () => Stream.dieMessage("executeStream is not implemented")
    }

    const lock = makeLock()
    const release = Effect.sync(lock.unsafeRelease)
    // A statement outside a transaction waits for the permit (a transaction may hold it across
    // awaits) and runs once it is free: better-sqlite3 runs it synchronously.
    const acquirer = Effect.uninterruptibleMask((restore) => Effect.as(Effect.zipRight(lock.take(restore), release), connection))
    const transactionAcquirer = Effect.uninterruptibleMask((restore) =>
      Effect.as(
        Effect.zipRight(lock.take(restore), Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, release))),
        connection
      )
    )
    const sql = yield* SqlClient.make({
      acquirer,
      compiler: Statement.makeCompilerSqlite(),
      transactionAcquirer,
      spanAttributes: [["db.system.name", "sqlite"]]
    }).pipe(Effect.provide(Reactivity.layer))
    return { sql, run, connection, lock } satisfies SqliteConnection
  })
