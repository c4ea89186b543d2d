/**
 * Where a chaos run keeps its queue — one SQLite file, or a PostgreSQL database (`--pg`) — and how
 * every process of the run (parent, producer, workers) opens it. The receiver stays on SQLite in
 * both cases (`SqliteInbox`, see business.ts): its effect log's autoincrement order is the order
 * of application, which the checks read.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, ExecutionStrategy, Exit, Schedule, Scope } from "effect"
import type { PolicyInput, RelayQueueService } from "../../src/index.js"
import { PgRelayQueue, SqliteRelayQueue } from "../../src/index.js"

/** The queue store of a run, as the parent passes it to its children (JSON). */
export type QueueStore =
  | { readonly kind: "sqlite"; readonly file: string; readonly busyTimeoutMs: number }
  | {
    readonly kind: "pg"
    /** The run's own database (see postgres.ts). */
    readonly url: string
    /** How claims share the store; fixed by the parent, which creates it. */
    readonly claims: "exact" | "parallel"
  }

/** How long a process keeps trying to open a PostgreSQL store that is down (a server restart). */
const OpenPatience = Duration.seconds(90)

const isSqlError = (error: unknown): error is SqlError => (error as { _tag?: unknown } | undefined)?._tag === "SqlError"

/**
 * Opens the run's queue for the scope. On PostgreSQL every process reckons with the server's
 * clock (`time: "database"`: one time line for leases, whatever the processes' clocks say), uses a
 * small pool, and retries opening while the server is unreachable — a restart or a terminated
 * connection is a fault the run injects, not a reason for a process to die.
 */
export const openQueue = (
  store: QueueStore,
  policy?: PolicyInput
): Effect.Effect<RelayQueueService, unknown, Scope.Scope> =>
  store.kind === "sqlite"
    ? SqliteRelayQueue.make({ filename: store.file, busyTimeoutMillis: store.busyTimeoutMs, policy })
    : retrying(PgRelayQueue.make({ url: store.url, claims: store.claims, time: "database", maxConnections: 2, policy }))

/** Retries `open` on a `SqlError`; a failed attempt releases what it had opened (its own scope). */
const retrying = <A, E>(open: Effect.Effect<A, E, Scope.Scope>): Effect.Effect<A, E, Scope.Scope> =>
  Effect.flatMap(Effect.scope, (outer) =>
    Effect.retry(
      Effect.flatMap(Scope.fork(outer, ExecutionStrategy.sequential), (inner) =>
        Effect.onError(Scope.extend(open, inner), (cause) => Scope.close(inner, Exit.failCause(cause)))),
      { while: isSqlError, schedule: Schedule.spaced(Duration.millis(250)).pipe(Schedule.upTo(OpenPatience)) }
    ))
