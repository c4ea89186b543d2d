/**
 * The PostgreSQL store's hot operations (`QueueBackend.operations`): each one call of a server
 * function (`PgFunctions`), outside any transaction of the caller's — one round trip, committed
 * by the server as it returns. With a `beforeCommit` (fault points), the call runs in a
 * transaction of the store's instead, that runs it before COMMIT.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Either, Schema } from "effect"
import { ClockRegressed, GroupConflict } from "../../domain/Errors.js"
import type { EnqueueConflict } from "../../domain/Errors.js"
import type { EnqueueCommand } from "../../domain/Operations.js"
import { Quarantined } from "../../domain/Notable.js"
import { EnqueueResult, SettleOutcome } from "../../domain/Outcomes.js"
import type { Claimed } from "../../domain/Outcomes.js"
import type { RelayPolicy } from "../../domain/Policy.js"
import { enqueueConflict } from "../../domain/Protocol.js"
import type { Operations, Stepped } from "../../services/QueueBackend.js"
import { retryRaces } from "./PgStore.js"
import type { PgStore } from "./PgStore.js"
import * as Rows from "./QueueRows.js"
import { alone, causeOf, insideTransaction, isolated, misuse } from "./Store.js"
import type { Store } from "./Store.js"

const Regressed = Schema.Struct({ regressed: Schema.Struct({ now: Schema.Number, tick: Schema.Number }) })

const StepAnswer = Schema.Struct({
  clamped: Schema.Boolean,
  outcomes: Schema.Array(SettleOutcome),
  now: Schema.Number,
  quarantined: Schema.Array(Quarantined),
  claims: Schema.Array(Schema.Struct({ event: Schema.Unknown, group: Schema.NullOr(Schema.String), previousSeq: Schema.NullOr(Schema.Number) })),
  wakeAt: Schema.NullOr(Schema.Number)
})

const EnqueueAnswer = Schema.Struct({
  clamped: Schema.Boolean,
  results: Schema.Array(EnqueueResult)
})

const decodeStep = Schema.decodeUnknownEither(Schema.parseJson(Schema.Union(Regressed, StepAnswer)))
const decodeEnqueue = Schema.decodeUnknownEither(Schema.parseJson(Schema.Union(Regressed, EnqueueAnswer)))
const ConflictDetail = Schema.parseJson(Schema.Struct({ eventId: Schema.String, storedFlowId: Schema.String, storedSeq: Schema.Number }))
const GroupDetail = Schema.parseJson(Schema.Struct({ flowId: Schema.String, storedGroup: Schema.NullOr(Schema.String), requestedGroup: Schema.String }))

/**
 * A function's answer, decoded: the time behind the stored tick (strict mode) as `ClockRegressed`;
 * an answer that does not decode is a store we cannot trust (a defect).
 */
const answerOf = <A extends object>(decode: (text: unknown) => Either.Either<A | typeof Regressed.Type, unknown>) =>
(rows: ReadonlyArray<{ readonly answer: string }>): Effect.Effect<Either.Either<A, ClockRegressed>> => {
  const decoded = decode(rows[0]?.answer)
  if (Either.isLeft(decoded)) return Effect.die(decoded.left)
  const answer = decoded.right
  return Effect.succeed("regressed" in answer ? Either.left(new ClockRegressed(answer.regressed)) : Either.right(answer))
}

/** An enqueue's conflict raised by the server (`FR001`, `FR002`) as the domain's error; any other failure as it is. */
const conflictOf = (error: SqlError, commands: ReadonlyArray<EnqueueCommand>): Effect.Effect<never, EnqueueConflict | GroupConflict | SqlError> => {
  const code = causeOf(error, "code")
  if (code === "FR001") {
    const detail = Schema.decodeUnknownSync(ConflictDetail)(causeOf(error, "message"))
    const command = commands.find((c) => c.eventId === detail.eventId)!
    return Effect.fail(enqueueConflict(command.eventId, command.flowId, { flowId: detail.storedFlowId, seq: detail.storedSeq }))
  }
  if (code === "FR002") return Effect.fail(new GroupConflict(Schema.decodeUnknownSync(GroupDetail)(causeOf(error, "message"))))
  return Effect.fail(error)
}

/** The hot operations of `store`, claiming as `parallel` says. */
export const make = (store: PgStore, parallel: boolean): Operations => {
  const { sql } = store
  const aloneOnClient: Store["write"] = store.onClient ? alone((effect) => effect, "write") : (effect) => effect
  const strictOf = (policy: RelayPolicy) => policy.clock !== "clamp"
  // The store's clock (null: the server reads its own) or the process's.
  const time = store.now === undefined ? Clock.currentTimeMillis : Effect.succeed(null)
  /**
   * A call at the time read just before it. A time behind the stored tick may be one read before
   * another writer stored a later one: the call is made once more at a time read after it
   * answered, and only then is the time behind (`ClockRegressed`).
   */
  const atTime = <A extends object>(call: (now: number | null) => Effect.Effect<Either.Either<A, ClockRegressed>, SqlError>) => {
    const once = Effect.flatMap(time, call)
    return Effect.flatMap(once, (first) => (Either.isRight(first) ? Effect.succeed(first.right) : Effect.flatMap(once, (again) => again)))
  }
  const retried = <A, E>(call: Effect.Effect<A, E | SqlError>) => (parallel ? retryRaces(call) : call)
  /**
   * Outside the caller's transactions, or with `beforeCommit`, in a transaction of the store's; on
   * the application's client, refused inside the application's transaction (`TransactionMisuse`).
   */
  const run = <A, E>(call: Effect.Effect<A, E | SqlError>, beforeCommit: Effect.Effect<void> | undefined) =>
    aloneOnClient(
      beforeCommit === undefined
        ? isolated(retried(call))
        : (parallel ? store.rowLockedWrite : store.write)(Effect.zipLeft(call, isolated(beforeCommit)))
    )

  const step: Operations["step"] = (items, limit, policy, beforeCommit) =>
    run(
      atTime((now) =>
        Effect.flatMap(
          sql.unsafe<{ readonly answer: string }>(stepText, [
            parallel,
            store.lockTimeoutMillis,
            now,
            strictOf(policy),
            policy.leaseTicks,
            policy.retryBudget,
            policy.backoffBase,
            policy.backoffCap,
            policy.jitter === "full",
            items.map((item) => item.token.eventId),
            items.map((item) => item.token.generation),
            items.map((item) => verdicts[item.verdict._tag]),
            items.map(({ verdict }) => (verdict._tag === "Ack" ? null : verdict.reason)),
            items.map(({ verdict }) => (verdict._tag === "Retry" ? verdict.retryAfter ?? null : null)),
            items.map((item) => item.draw),
            limit
          ]),
          answerOf(decodeStep)
        )
      ),
      beforeCommit
    ).pipe(Effect.flatMap(stepped))

  const enqueue: Operations["enqueue"] = (commands, policy) => {
    const call = atTime((now) =>
      Effect.flatMap(
        sql<{ readonly answer: string }>`SELECT relay_enqueue(${parallel}, ${store.lockTimeoutMillis}, ${now}, ${strictOf(policy)},
          ${policy.admission === "seed"}, ${JSON.stringify(commands.map(commandOf))}::jsonb) AS answer`,
        answerOf(decodeEnqueue)
      )
    ).pipe(Effect.catchTag("SqlError", (error) => conflictOf(error, commands)))
    return !store.onClient ? run(call, undefined) : Effect.flatMap(insideTransaction, (inside) =>
      !inside
        ? isolated(retried(call))
        : parallel
        // In the application's transaction, behind a savepoint: a conflict leaves the application's work as it was.
        ? retried(sql.withTransaction(call))
        : misuse(
          "enqueue",
          "an enqueue inside the application's transaction needs a store with parallel claims (claims: \"parallel\"); " +
            "with exact claims it would hold the store-wide lock until the application commits"
        ))
  }
  return { step, enqueue }
}

/** The step's call: its parameters bound in order, the settles' as one array each. */
const stepText = `SELECT relay_step(${Array.from({ length: 16 }, (_, i) => `$${i + 1}`).join(", ")}) AS answer`

const verdicts = { Ack: "ack", Quarantine: "quarantine", Retry: "retry" } as const

const commandOf = (command: EnqueueCommand) => ({
  e: command.eventId,
  f: command.flowId,
  b: command.body.text,
  w: command.weight ?? null,
  g: command.group ?? null
})

/** A step's answer as the queue takes it: its claims as the domain's records. */
const stepped = (answer: typeof StepAnswer.Type): Effect.Effect<Stepped> =>
  Effect.map(Rows.records.events(answer.claims.map((claim) => claim.event)), (events) => ({
    ...answer,
    groups: answer.claims.flatMap((claim) => claim.group ?? []),
    claims: events.map((event, i): typeof Claimed.Type => {
      const previousSeq = answer.claims[i]!.previousSeq
      const token = { eventId: event.eventId, generation: event.generation }
      return previousSeq === null
        ? { _tag: "Claimed", token, event, leaseUntil: event.leaseUntil! }
        : { _tag: "Claimed", token, event, leaseUntil: event.leaseUntil!, previousSeq }
    })
  }))
