/**
 * Keeps the queue's flow and group tables free of dead row versions on PostgreSQL. Every claim,
 * settle and enqueue rewrites a few rows of `relay_flow` (and of `relay_group` for grouped flows)
 * in columns their indexes cover, so no update is HOT: each leaves a dead version in the heap and
 * in every index, and only VACUUM removes them. The turn walk reads its index from the least
 * `served`, exactly where the dead entries of the flows it moved to the back pile up, so without a
 * vacuum a claim costs more with every write since the last one (measured: the server's CPU per
 * single step 0.8 → 3.4 ms over 16,000 steps on 64 flows). Autovacuum visits a database at most
 * once a minute by default (and may be off); the store's own writers vacuum these two small
 * tables instead, at most once per interval and only after writing, with `SKIP_LOCKED` so
 * processes never wait for each other's vacuum. The event table is left to autovacuum: each of its
 * rows is rewritten a bounded number of times.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Duration, Effect } from "effect"
import type { Scope } from "effect"
import { InvalidInput } from "../../domain/Errors.js"
import type { QueueBackend } from "../../services/QueueBackend.js"
import { isolated } from "./Store.js"

/** The statement, sent alone outside any transaction (VACUUM cannot run in one). */
const statement = "VACUUM (SKIP_LOCKED) relay_flow, relay_group"

/** How often a store's writers vacuum the flow and group tables by default. */
export const defaultInterval = Duration.seconds(1)

/**
 * The `vacuumInterval` option checked: a finite positive duration, `null` (never: leave it to
 * autovacuum), or the default when omitted; anything else is an `InvalidInput` naming it.
 */
export const decodeInterval = (input: unknown, operation: string): Effect.Effect<Duration.Duration | null, InvalidInput> => {
  if (input === null) return Effect.succeed(null)
  if (input === undefined) return Effect.succeed(defaultInterval)
  const duration = Duration.decodeUnknown(input)
  return duration._tag === "Some" && Duration.isFinite(duration.value) && Duration.toMillis(duration.value) > 0
    ? Effect.succeed(duration.value)
    : Effect.fail(
      new InvalidInput({
        operation,
        message: `vacuumInterval must be a finite positive duration (e.g. "1 second") or null, got ${JSON.stringify(input)}`
      })
    )
}

/**
 * `backend` with its writes followed, once `interval` has passed since the last vacuum started,
 * by a vacuum of the flow and group tables in a fiber of its own (the write does not wait for it;
 * a failed vacuum is logged and tried again after the next interval). With a scope, closing it
 * interrupts a vacuum in progress.
 */
export const vacuuming = (
  sql: SqlClient.SqlClient,
  backend: QueueBackend,
  interval: Duration.Duration | null,
  scope?: Scope.Scope
): QueueBackend => {
  if (interval === null) return backend
  const every = Duration.toMillis(interval)
  // The first interval starts at the first write: a store opened and written once is not vacuumed.
  let last: number | undefined
  let running = false
  const vacuum = isolated(sql.unsafe(statement)).pipe(
    Effect.tap(() => Effect.logDebug("vacuumed the queue's flow and group tables")),
    Effect.catchAllCause((cause) => Effect.logWarning("vacuuming the queue's flow and group tables failed", cause)),
    Effect.withSpan("PgRelayQueue.vacuum", { root: true }),
    Effect.ensuring(Effect.sync(() => void (running = false)))
  )
  const afterWrite = Effect.flatMap(Clock.currentTimeMillis, (now) => {
    if (last === undefined) last = now
    if (running || now - last < every) return Effect.void
    last = now
    running = true
    return Effect.asVoid(scope === undefined ? Effect.forkDaemon(vacuum) : Effect.forkIn(vacuum, scope))
  })
  const join = backend.join
  return {
    ...backend,
    write: (body, beforeCommit) => Effect.zipLeft(backend.write(body, beforeCommit), afterWrite),
    join: join === undefined ? undefined : (body) => Effect.zipLeft(join(body), afterWrite)
  }
}
