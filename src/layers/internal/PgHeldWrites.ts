/**
 * Fewer round trips for a PostgreSQL write transaction: statements whose answers are not needed
 * yet wait, and go with the transaction's next statement whose answer is (`PgTransactions`: one
 * batch, one round trip) — a write nobody reads (`execWrite`), or a read started early
 * (`execLater`: a settle's events travel with the clock read). A settle's writes and the claim's
 * walk that follows them go in one round trip; a claim's writes go with COMMIT.
 *
 * The batch is the same transaction as one statement at a time: the server runs its statements in
 * their order, each seeing what those before it did. A held statement that fails fails there
 * instead of at its call, in the same transaction, which rolls back as before.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Effect, FiberRef } from "effect"
import * as CompiledOnce from "./CompiledOnce.js"
import { heldIn, sendAll, wired } from "./PgTransactions.js"
import { locally, rowsOf } from "./Store.js"
import type { AnyFiber, Held, Wired } from "./PgTransactions.js"

/** The statements held in the application's transaction an enqueue runs in (`holding`). */
const heldStatements = FiberRef.unsafeMake<Array<Held> | undefined>(undefined)

/**
 * `f` of what the fiber's transaction holds — the store's own write transaction, or `holding`'s
 * in the application's; undefined outside both (a write then runs at once) — and of the fiber, in
 * one runtime step.
 */
const withHeld = <A, E>(f: (held: Array<Held> | undefined, fiber: AnyFiber) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.withFiberRuntime((fiber) => f(heldIn(fiber.currentContext) ?? fiber.getFiberRef(heldStatements), fiber))

/**
 * Sends what is held, and `main` after it (the statement, as sent), in one round trip: `main`'s
 * rows; in a runtime step of `fiber`.
 */
const sendWith = <A extends object>(
  fiber: AnyFiber,
  held: Array<Held> | undefined,
  main?: readonly [Statement.Statement<A>, Wired]
): Effect.Effect<ReadonlyArray<A>, SqlError> => {
  const sent = held === undefined ? [] : held.splice(0)
  if (sent.length === 0) {
    return main === undefined ? Effect.succeed([]) : sendAll(fiber, [main[1]], undefined, (answers) => rowsOf(main[0], answers[0]!))
  }
  const statements = sent.map((h) => h.statement)
  if (main !== undefined) statements.push(main[1])
  // The held statements take their answers (or the batch's failure) as the batch ends.
  const answered = (answers: ReadonlyArray<ReadonlyArray<object>> | undefined, failure: SqlError | undefined) => {
    for (let i = 0; i < sent.length; i++) {
      if (failure !== undefined) sent[i]!.failure = failure
      else sent[i]!.answer = answers?.[i] ?? []
    }
  }
  return sendAll(fiber, statements, answered, (answers) => (main === undefined ? [] : rowsOf(main[0], answers[answers.length - 1]!)))
}

/**
 * Runs `effect` — an enqueue's work in the application's transaction, which the store does not
 * commit — holding the statements whose answers wait, and sends what is still held as it ends.
 * (The store's own write transactions hold them on their connection, and send them with COMMIT.)
 */
export const holding = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  Effect.suspend(() => {
    const held: Array<Held> = []
    const sendHeld = Effect.withFiberRuntime<void, SqlError>((fiber) => Effect.asVoid(sendWith(fiber, held)))
    return locally(heldStatements, held)(Effect.zipLeft(effect, sendHeld))
  })

/** A store's statements run with what is held (`make`). */
export interface HeldWrites {
  /** Runs `statement` with what is held in front of it (one round trip): its rows. */
  readonly exec: <A extends object>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /** Holds a write whose result nobody reads until the transaction's next statement; outside a holding transaction it runs at once. */
  readonly execWrite: (statement: Statement.Statement<object>) => Effect.Effect<void, SqlError>
  /**
   * Holds a read until the transaction's next statement, and answers `then` of the effect that
   * answers its rows (sending it, with what is held before it, if nothing sent it yet). Outside a
   * holding transaction it runs at once.
   */
  readonly execLater: <A extends object, B>(
    statement: Statement.Statement<A>,
    then: (rows: Effect.Effect<ReadonlyArray<A>, SqlError>) => B
  ) => Effect.Effect<B>
}

/** The held writes of one store: its statements, all built by its one client, compiled by it (`CompiledOnce`). */
export const make = (): HeldWrites => {
  const compile = CompiledOnce.make()
  const exec = <A extends object>(statement: Statement.Statement<A>): Effect.Effect<ReadonlyArray<A>, SqlError> =>
    withHeld((held, fiber) => sendWith(fiber, held, [statement, wired(compile, statement, true)]))
  const execWrite = (statement: Statement.Statement<object>): Effect.Effect<void, SqlError> =>
    withHeld((held, fiber) => {
      if (held === undefined) return Effect.asVoid(sendWith(fiber, undefined, [statement, wired(compile, statement, false)]))
      held.push({ statement: wired(compile, statement, false) })
      return Effect.void
    })
  const execLater = <A extends object, B>(
    statement: Statement.Statement<A>,
    then: (rows: Effect.Effect<ReadonlyArray<A>, SqlError>) => B
  ): Effect.Effect<B> =>
    withHeld((held) => {
      if (held === undefined) return Effect.succeed(then(exec(statement)))
      const entry: Held = { statement: wired(compile, statement, true) }
      held.push(entry)
      const answer = Effect.withFiberRuntime((fiber): Effect.Effect<ReadonlyArray<A>, SqlError> =>
        entry.failure !== undefined
          ? Effect.fail(entry.failure)
          : entry.answer !== undefined
          ? Effect.succeed(rowsOf(statement, entry.answer))
          : Effect.zipRight(sendWith(fiber, held), answer)
      )
      return Effect.succeed(then(answer))
    })
  return { exec, execWrite, execLater }
}
