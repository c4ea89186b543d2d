/**
 * The worker: claim a head, deliver it without holding the queue's lock, settle the reply —
 * once (`step`), in batches (`stepBatch`), or as a daemon of N concurrent workers (`run`).
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Config, Context, Deferred, Duration, Effect, Either, Fiber, Layer, Metric, Queue, Schema } from "effect"
import type { Scope } from "effect"
import type { ClockRegressed, InvalidInput } from "../domain/Errors.js"
import * as Idle from "../domain/Idle.js"
import type { NotableChange } from "../domain/Notable.js"
import * as Options from "../domain/Options.js"
import { deliveryOf } from "../domain/Protocol.js"
import type { Claimed, DeliveryReply, SettleOutcome } from "../domain/Outcomes.js"
import { verdictOf } from "../domain/Protocol.js"
import * as Coalesce from "./Coalesce.js"
import * as Deadline from "./Deadline.js"
import * as Metrics from "./Metrics.js"
import { RelayQueue } from "./RelayQueue.js"
import type { SettledAndClaimed, SettleInput } from "./RelayQueue.js"
import { Transport } from "./Transport.js"
import type { DeliveryFailed } from "./Transport.js"


/** What one step did. */
export type StepResult =
  | { readonly _tag: "Idle"; readonly wakeAt?: number | undefined }
  | {
    readonly _tag: "Delivered"
    readonly claimed: typeof Claimed.Type
    readonly reply: DeliveryReply
    readonly outcome: SettleOutcome
  }

/** What one batched step did: replies settled, and deliveries that got no reply (left to their lease). */
export interface BatchResult {
  /** The deliveries that got a reply, and what their settles did. */
  readonly delivered: ReadonlyArray<Extract<StepResult, { readonly _tag: "Delivered" }>>
  /** The claims whose delivery got no reply (no settle written: their leases expire). */
  readonly failed: ReadonlyArray<{ readonly claimed: typeof Claimed.Type; readonly error: DeliveryFailed }>
}

/** Errors of a step: the queue's, or a delivery that got no reply (no settle is written then). */
export type StepError = ClockRegressed | InvalidInput | SqlError | DeliveryFailed

/** Options of the worker daemon. */
export interface RunOptions {
  /**
   * Concurrent workers in this process (default 1). Single-step workers (`batchSize: 1`) share
   * their queue transactions (group commit); over a transport that takes batches (`deliverBatch`,
   * as the in-process inbox does) they run as one loop holding up to `workers` heads, whose
   * deliveries are one receiver call.
   */
  readonly workers?: number | undefined
  /** Claim and settle this many heads per transaction (default 1: single steps). */
  readonly batchSize?: number | undefined
  /** Longest sleep when nothing is eligible; a local enqueue wakes workers at once (default 1 s). */
  readonly pollInterval?: Duration.DurationInput | undefined
  /** A delivery without a reply by then is settled as `Retry` (default 30 s). Must be shorter than the lease. */
  readonly deliveryTimeout?: Duration.DurationInput | undefined
  /** On interruption, how long in-flight steps may finish before they are interrupted (default 10 s). */
  readonly shutdownGrace?: Duration.DurationInput | undefined
  /** How often the queue-depth gauges are sampled (default 10 s; `null`: never). Sampling counts events by state. */
  readonly metricsInterval?: Duration.DurationInput | null | undefined
  /** How often the queue prunes what its retention lets go (default 1 minute; `null`: never). See `RelayQueue.prune`. */
  readonly pruneInterval?: Duration.DurationInput | null | undefined
  /**
   * How often the store's policy is read again (default 5 s; `null`: never): a change made with
   * `setPolicy` — in any process — reaches this relay's next claims and settles within it, without
   * a restart. A process opened with explicit protocol settings adopts the store's too: every
   * process of a store runs one protocol.
   */
  readonly policyInterval?: Duration.DurationInput | null | undefined
  /**
   * How often the retries of each flow are told (default 10 s; `null`: never, beyond each
   * delivery's Debug line): one Warn line per flow that had retries in the interval, with their
   * count and the last reason — a receiver that is down for a while writes a line per flow, not
   * one per delivery.
   */
  readonly retryLogInterval?: Duration.DurationInput | null | undefined
}

/** Run options that are malformed (the message names the option) or cannot work together; nothing was started. */
export class RelayConfigError extends Schema.TaggedError<RelayConfigError>()("RelayConfigError", {
  message: Schema.String
}) {}

/** The worker operations. */
export interface RelayService {
  /** One claim → deliver → settle; a delivery failure fails the step (nothing is settled). */
  readonly step: Effect.Effect<StepResult, StepError>
  /** Claims up to `size` heads in one transaction, delivers them, settles the replies in one transaction. */
  readonly stepBatch: (size: number) => Effect.Effect<BatchResult, Exclude<StepError, DeliveryFailed>>
  /**
   * Runs N workers until interrupted. Delivery timeouts and transport failures are settled as
   * `Retry` (with the cause logged); queue errors are logged and retried after a poll interval.
   * Interruption stops claiming, lets in-flight steps finish within the grace period, then
   * interrupts them (an interrupted delivery writes no settle: its lease lapses).
   */
  readonly run: (options?: RunOptions) => Effect.Effect<never, RelayConfigError>
}

/** `RunOptions` from configuration (environment variables by default), e.g. `FAIR_RELAY_WORKERS=4`. */
export const runConfig: Config.Config<RunOptions> = Config.all({
  workers: Config.integer("FAIR_RELAY_WORKERS").pipe(Config.withDefault(1)),
  batchSize: Config.integer("FAIR_RELAY_BATCH_SIZE").pipe(Config.withDefault(1)),
  pollInterval: Config.duration("FAIR_RELAY_POLL_INTERVAL").pipe(Config.withDefault(Duration.seconds(1))),
  deliveryTimeout: Config.duration("FAIR_RELAY_DELIVERY_TIMEOUT").pipe(Config.withDefault(Duration.seconds(30))),
  shutdownGrace: Config.duration("FAIR_RELAY_SHUTDOWN_GRACE").pipe(Config.withDefault(Duration.seconds(10)))
})

interface Settings {
  readonly workers: number
  readonly batchSize: number
  readonly pollInterval: Duration.Duration
  readonly deliveryTimeout: Duration.Duration
  readonly shutdownGrace: Duration.Duration
  readonly metricsInterval: Duration.Duration | null
  readonly pruneInterval: Duration.Duration | null
  readonly policyInterval: Duration.Duration | null
  readonly retryLogInterval: Duration.Duration | null
}

const positive = Options.DurationMillis.pipe(Schema.compose(Schema.Number.pipe(Schema.positive({ message: () => "expected a duration > 0" }))))
const interval = Schema.optional(Schema.NullOr(positive))

/** The run options as a caller may write them: known keys only, each of its kind (see `RunOptions`). */
const checkRunOptions = Options.checker(Options.record("run options", {
  workers: Schema.optional(Options.Count(1, 10_000)),
  batchSize: Schema.optional(Options.Count(1, 10_000)),
  pollInterval: Schema.optional(positive),
  deliveryTimeout: Schema.optional(positive),
  shutdownGrace: Schema.optional(Options.DurationMillis),
  metricsInterval: interval,
  pruneInterval: interval,
  policyInterval: interval,
  retryLogInterval: interval
}))

const settingsOf = (options: RunOptions | undefined, leaseTicks: number): Effect.Effect<Settings, RelayConfigError> =>
  Effect.gen(function*() {
    const fail = (message: string) => Effect.fail(new RelayConfigError({ message }))
    const given = options === undefined ? {} : yield* Either.match(checkRunOptions(options), { onLeft: fail, onRight: Effect.succeed })
    const duration = (millis: number | undefined, fallback: Duration.Duration) => millis === undefined ? fallback : Duration.millis(millis)
    const sometimes = (millis: number | null | undefined, fallback: Duration.Duration) => millis === null ? null : duration(millis, fallback)
    const settings: Settings = {
      workers: given.workers ?? 1,
      batchSize: given.batchSize ?? 1,
      pollInterval: duration(given.pollInterval, Duration.seconds(1)),
      deliveryTimeout: duration(given.deliveryTimeout, Duration.seconds(30)),
      shutdownGrace: duration(given.shutdownGrace, Duration.seconds(10)),
      metricsInterval: sometimes(given.metricsInterval, Duration.seconds(10)),
      pruneInterval: sometimes(given.pruneInterval, Duration.minutes(1)),
      policyInterval: sometimes(given.policyInterval, Duration.seconds(5)),
      retryLogInterval: sometimes(given.retryLogInterval, Duration.seconds(10))
    }
    // A claim outliving its lease could be claimed again while the first delivery still runs.
    if (leaseTicks <= Duration.toMillis(settings.deliveryTimeout)) {
      return yield* fail(
        `the lease (${leaseTicks} ms) must be longer than the delivery timeout (${Duration.format(settings.deliveryTimeout)})`
      )
    }
    return settings
  })

/** Builds a worker over a queue and a transport. */
export const make: Effect.Effect<RelayService, never, RelayQueue | Transport> = Effect.gen(function*() {
  const queue = yield* RelayQueue
  const transport = yield* Transport

  const deliver = (claimed: typeof Claimed.Type) => transport.deliver(deliveryOf(claimed))

  /** claim → deliver → settle; a delivery failure fails the step. */
  const step: Effect.Effect<StepResult, StepError> = Effect.gen(function*() {
    const claimed = yield* queue.claim
    if (claimed._tag === "Idle") return claimed
    const reply = yield* deliver(claimed)
    const outcome = yield* queue.settle(claimed.token, reply)
    return { _tag: "Delivered", claimed, reply, outcome } as const
  }).pipe(Metrics.withHotSpan("Relay.step"))

  /**
   * What a daemon worker sends the queue between deliveries: the replies to the heads it held, and
   * how many heads to claim next (0 when stopping). One `settleAndClaim`: one commit per turn.
   */
  interface Exchange {
    readonly settles: ReadonlyArray<SettleInput>
    readonly limit: number
  }

  const { groupCommitSizeOf } = Metrics

  /** One `settleAndClaim` carrying several single steps' settles and claims, counted as a group commit. */
  const sharedExchange = ({ limit, settles }: Exchange) =>
    Effect.zipRight(
      Metrics.record((update) => {
        if (settles.length > 0) update(groupCommitSizeOf.settle, settles.length)
        if (limit > 0) update(groupCommitSizeOf.claim, limit)
      }),
      queue.settleAndClaim(settles, limit)
    )

  /**
   * Many workers' exchanges as one `settleAndClaim`: the settles in the order they came, then the
   * claims, handed out in the order they were asked for (a worker that gets none is told when to
   * look again if nothing was eligible). Outcomes equal the single calls one after another.
   */
  const exchangeAll = Effect.fnUntraced(function*(exchanges: ReadonlyArray<Exchange>) {
    const settles = exchanges.flatMap((exchange) => exchange.settles)
    const limit = exchanges.reduce((sum, exchange) => sum + exchange.limit, 0)
    const { claims, outcomes, wakeAt } = yield* sharedExchange({ settles, limit })
    let settled = 0
    let claimed = 0
    return exchanges.map((exchange): SettledAndClaimed => {
      const mine = {
        outcomes: outcomes.slice(settled, (settled += exchange.settles.length)),
        claims: claims.slice(claimed, (claimed += exchange.limit))
      }
      return wakeAt === undefined ? mine : { ...mine, wakeAt }
    })
  })

  /** One outcome per claim: through the transport's batch call when it has one. */
  const deliverAll = (
    claims: ReadonlyArray<typeof Claimed.Type>
  ): Effect.Effect<ReadonlyArray<Either.Either<DeliveryReply, DeliveryFailed>>> => {
    const { deliverBatch } = transport
    if (deliverBatch === undefined || claims.length <= 1) return Effect.forEach(claims, (claimed) => Effect.either(deliver(claimed)))
    return Effect.match(deliverBatch(claims.map(deliveryOf)), {
      onFailure: (error) => claims.map(() => Either.left(error)),
      onSuccess: (replies) => replies.map((reply) => Either.right(reply))
    })
  }

  /** claimBatch → deliver → settleBatch of the replies that came; the rest are left to their lease. */
  const stepBatch = Effect.fnUntraced(function*(size: number) {
    const claims = yield* queue.claimBatch(size)
    const replies = claims.length === 0 ? [] : yield* deliverAll(claims)
    const delivered: Array<{ readonly claimed: typeof Claimed.Type; readonly reply: DeliveryReply }> = []
    const failed: Array<BatchResult["failed"][number]> = []
    claims.forEach((claimed, i) => {
      const reply = replies[i]!
      if (reply._tag === "Right") delivered.push({ claimed, reply: reply.right })
      else failed.push({ claimed, error: reply.left })
    })
    const outcomes = delivered.length === 0
      ? []
      : yield* queue.settleBatch(delivered.map(({ claimed, reply }) => ({ token: claimed.token, reply })))
    return {
      delivered: delivered.map(({ claimed, reply }, i) => ({ _tag: "Delivered", claimed, reply, outcome: outcomes[i]! }) as const),
      failed
    }
  }, Metrics.withHotSpan("Relay.stepBatch"))

  /**
   * A delivery that always ends in a reply: a timeout, a transport failure or a defect becomes
   * `Retry` with the cause logged; only interruption passes through (then nothing is settled).
   */
  const orRetry = (timeout: Duration.Duration, annotations: Record<string, unknown>, deliveries = 1) =>
  <A>(delivery: Effect.Effect<A, DeliveryFailed>, retry: (reply: DeliveryReply) => A): Effect.Effect<A> =>
    Deadline.timed(delivery, timeout, annotations).pipe(
      // The metrics count deliveries: each delivery of a batch waited as long as the batch.
      Effect.flatMap(([elapsed, reply]) =>
        Effect.as(
          Metrics.record((update) => {
            for (let i = 0; i < deliveries; i++) update(Metrics.deliveryLatency, Duration.toMillis(elapsed))
          }),
          reply
        )
      ),
      Effect.catchAllCause((cause): Effect.Effect<A> => {
        if (Cause.isInterruptedOnly(cause)) return Effect.failCause(Cause.stripFailures(cause))
        const failure = Cause.squash(cause)
        const reason = Cause.isFailType(cause) && cause.error._tag === "TimeoutException"
          ? `delivery timeout after ${Duration.format(timeout)}`
          : `transport: ${failure instanceof Error ? failure.message : String(failure)}`
        // Debug: a receiver that is down fails every delivery; `run` tells each flow's retries at
        // Warn once per `retryLogInterval`, with the last reason.
        return Effect.logDebug("delivery got no reply; settling as Retry", cause).pipe(
          Effect.annotateLogs(annotations),
          Effect.zipRight(Metric.incrementBy(Metrics.deliveryFailures, deliveries)),
          Effect.as(retry({ _tag: "Retry", reason }))
        )
      })
    )

  const deliverOrRetry = (claimed: typeof Claimed.Type, timeout: Duration.Duration) =>
    orRetry(timeout, { eventId: claimed.event.eventId, flowId: claimed.event.flowId, generation: claimed.token.generation })(
      deliver(claimed),
      (reply) => reply
    )

  /**
   * A batch delivery that always ends in one reply per claim (see `deliverOrRetry`). One claim goes
   * through `deliver`, as in `deliverAll`: the receiver's single call is the cheaper one.
   */
  const deliverAllOrRetry = (claims: ReadonlyArray<typeof Claimed.Type>, timeout: Duration.Duration) =>
    claims.length === 1
      ? Effect.map(deliverOrRetry(claims[0]!, timeout), (reply) => [reply])
      : transport.deliverBatch === undefined
      ? Effect.forEach(claims, (claimed) => deliverOrRetry(claimed, timeout), { concurrency: "unbounded" })
      : orRetry(timeout, { eventIds: claims.map((c) => c.event.eventId).join(",") }, claims.length)(
        transport.deliverBatch(claims.map(deliveryOf)),
        (reply) => claims.map(() => reply)
      )

  /** How a daemon worker delivers what it holds and trades the replies for its next heads. */
  interface Lane {
    readonly send: (claims: ReadonlyArray<typeof Claimed.Type>) => Effect.Effect<ReadonlyArray<DeliveryReply>>
    readonly exchange: (exchange: Exchange) => Effect.Effect<SettledAndClaimed, Exclude<StepError, DeliveryFailed>>
  }

  /** How many worker fibers `run` starts, how many heads each holds at most, and their lane. */
  interface Layout {
    readonly fibers: number
    readonly heads: number
    readonly lane: Lane
  }

  /**
   * A batch worker sends its own `settleAndClaim`. Single-step workers share their transactions
   * (group commit). When the transport also takes batches, their deliveries would be one receiver
   * call as well: then the N workers run as one loop holding up to N heads — the same
   * transactions, calls and outcomes, without a fiber and two hand-offs per worker.
   */
  const layoutOf = (settings: Settings): Effect.Effect<Layout, never, Scope.Scope> => {
    const { batchSize, deliveryTimeout, workers } = settings
    const sendAll: Lane["send"] = (claims) => deliverAllOrRetry(claims, deliveryTimeout)
    if (batchSize > 1) {
      const exchange: Lane["exchange"] = ({ limit, settles }) => queue.settleAndClaim(settles, limit)
      return Effect.succeed({ fibers: workers, heads: batchSize, lane: { send: sendAll, exchange } })
    }
    if (transport.deliverBatch !== undefined) {
      const send: Lane["send"] = (claims) => Effect.zipRight(Metrics.record((update) => update(groupCommitSizeOf.deliver, claims.length)), sendAll(claims))
      return Effect.succeed({ fibers: 1, heads: workers, lane: { send, exchange: sharedExchange } })
    }
    // One worker has no one to share a transaction with: its exchanges go straight to the queue,
    // without the gathering fiber's two hand-offs per exchange.
    if (workers === 1) return Effect.succeed({ fibers: 1, heads: 1, lane: { send: sendAll, exchange: sharedExchange } })
    // Group commit: each worker delivers on its own; the exchanges N workers make at once are one transaction.
    return Effect.map(Coalesce.make(exchangeAll, workers), (exchange) => ({ fibers: workers, heads: 1, lane: { send: sendAll, exchange } }))
  }

  const run = (options?: RunOptions): Effect.Effect<never, RelayConfigError> =>
    Effect.gen(function*() {
      const settings = yield* settingsOf(options, queue.policy.leaseTicks)
      // The group-commit fibers outlive the workers: they close with `run`'s scope, after shutdown.
      const { fibers: workerFibers, heads, lane } = yield* layoutOf(settings)
      const stopping = yield* Deferred.make<void>()
      const stopped = Deferred.isDone(stopping)

      // Each quarantine made through this queue instance is one Warn line. Subscribed before the
      // workers start, so none is missed; what is left at shutdown is told then.
      const told = yield* queue.watchChanges
      const tellQuarantine = (change: NotableChange): Effect.Effect<void> =>
        change._tag !== "Quarantined" ? Effect.void : Effect.logWarning(
          `event ${change.eventId} of flow ${change.flowId}${change.group === null ? "" : ` (group ${change.group})`} quarantined: ${change.reason}`
        ).pipe(Effect.annotateLogs({
          eventId: change.eventId,
          flowId: change.flowId,
          ...(change.group === null ? {} : { group: change.group }),
          reason: change.reason,
          generation: change.generation
        }))
      // A change taken is told before an interruption can land: none is lost between the two.
      const teller = Effect.forever(Effect.uninterruptibleMask((restore) => Effect.flatMap(restore(Queue.take(told)), tellQuarantine)))

      // The retries of each flow since the last line: their count, and the last reason given.
      const retries = new Map<string, { count: number; reason: string }>()
      const tallyRetries = (
        settles: ReadonlyArray<SettleInput>,
        outcomes: ReadonlyArray<SettleOutcome>,
        claims: ReadonlyArray<typeof Claimed.Type>
      ) => {
        outcomes.forEach((outcome, i) => {
          if (outcome._tag !== "RetryScheduled") return
          const verdict = verdictOf(settles[i]!.reply)
          const reason = verdict._tag === "Retry" ? verdict.reason : verdict._tag
          const flowId = claims[i]!.event.flowId
          retries.set(flowId, { count: (retries.get(flowId)?.count ?? 0) + 1, reason })
        })
      }
      const tellRetries = Effect.suspend(() => {
        if (retries.size === 0) return Effect.void
        const tallied = [...retries]
        retries.clear()
        return Effect.forEach(tallied, ([flowId, { count, reason }]) =>
          Effect.logWarning(`flow ${flowId}: ${count} ${count === 1 ? "retry" : "retries"} scheduled; last reason: ${reason}`).pipe(
            Effect.annotateLogs({ flowId, retries: count, reason })
          ), { discard: true })
      })
      const retryTeller = settings.retryLogInterval === null ? Effect.void : Effect.gen(function*() {
        const interval = settings.retryLogInterval!
        while (!(yield* stopped)) {
          yield* Effect.race(Effect.sleep(interval), Deferred.await(stopping))
          // Once stopping, the last line comes after the workers settled what they held.
          if (yield* stopped) break
          yield* tellRetries
        }
      })

      // Sleeps after an idle claim (`Idle.idleSleep`); returns the immediate wake-ups in a row so far.
      const sleepIdle = (wakeAt: number | undefined, inARow: number, work: Effect.Effect<void>) =>
        Effect.gen(function*() {
          const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          const sleep = Idle.idleSleep(wakeAt, now, Duration.toMillis(settings.pollInterval), inARow)
          yield* Effect.raceAll([Effect.sleep(Duration.millis(sleep.millis)), work, Deferred.await(stopping)])
          return sleep.inARow
        })

      /**
       * A worker holds the heads it claimed: it delivers them, then settles the replies and claims
       * its next heads in one transaction. Once stopping it claims no more, but settles what it holds.
       */
      const worker = (id: number) =>
        Effect.gen(function*() {
          let held: ReadonlyArray<typeof Claimed.Type> = []
          let inARow = 0
          while (held.length > 0 || !(yield* stopped)) {
            const replies = held.length === 0 ? [] : yield* lane.send(held)
            const settles = held.map((claimed, i) => ({ token: claimed.token, reply: replies[i]! }))
            const limit = (yield* stopped) ? 0 : heads
            // Watched before the claim: work that arrives between an idle claim and the sleep wakes it.
            const work = yield* queue.watchWork
            const result = yield* lane.exchange({ settles, limit }).pipe(
              Effect.catchAllCause((cause) =>
                Effect.as(Effect.logWarning("relay step failed; retrying after the poll interval", cause), undefined)
              )
            )
            if (result !== undefined && settings.retryLogInterval !== null && settles.length > 0) {
              tallyRetries(settles, result.outcomes, held)
            }
            held = result?.claims ?? []
            // Once stopping, the sleep ends at once (it races the stop).
            inARow = held.length > 0 ? 0 : yield* sleepIdle(result?.wakeAt, inARow, work)
          }
        }).pipe(Effect.annotateLogs({ worker: id }), Effect.withSpan("Relay.worker", { attributes: { worker: id } }))

      const sampler = settings.metricsInterval === null ? Effect.void : Effect.gen(function*() {
        const interval = settings.metricsInterval!
        while (!(yield* stopped)) {
          yield* queue.stats.pipe(
            Effect.tap((stats) =>
              Effect.forEach(Object.entries(stats.byState), ([state, n]) => Metric.set(Metric.tagged(Metrics.depth, "state", state), n))
            ),
            Effect.tap((stats) => Metric.set(Metrics.oldestEligibleAge, stats.oldestEligibleAgeMillis)),
            Effect.tap((stats) =>
              Effect.zipRight(
                Metric.set(Metric.tagged(Metrics.paused, "kind", "flow"), stats.paused.flows),
                Metric.set(Metric.tagged(Metrics.paused, "kind", "group"), stats.paused.groups)
              )
            ),
            Effect.catchAllCause((cause) => Effect.logWarning("sampling queue metrics failed", cause))
          )
          yield* Effect.race(Effect.sleep(interval), Deferred.await(stopping))
        }
      })

      // Retention: batches of a few hundred rows, so claims never wait long behind a prune.
      const pruner = settings.pruneInterval === null ? Effect.void : Effect.gen(function*() {
        const interval = settings.pruneInterval!
        while (!(yield* stopped)) {
          yield* Effect.race(Effect.sleep(interval), Deferred.await(stopping))
          if (yield* stopped) break
          yield* queue.prune().pipe(
            Effect.tap((pruned) => pruned.events + pruned.dedup === 0 ? Effect.void : Effect.logDebug("pruned").pipe(Effect.annotateLogs({ events: pruned.events, dedup: pruned.dedup }))),
            Effect.catchAllCause((cause) => Effect.logWarning("pruning the queue failed", cause))
          )
        }
      })

      // The store's policy, read again now and then: an operator's change reaches running workers.
      const policyReader = settings.policyInterval === null ? Effect.void : Effect.gen(function*() {
        const interval = settings.policyInterval!
        let lease = queue.policy.leaseTicks
        while (!(yield* stopped)) {
          yield* Effect.race(Effect.sleep(interval), Deferred.await(stopping))
          if (yield* stopped) break
          yield* queue.refreshPolicy.pipe(
            Effect.tap((policy) => {
              if (policy.leaseTicks === lease) return Effect.void
              lease = policy.leaseTicks
              return Effect.logWarning("the store's policy changed: claims now take the new lease").pipe(
                Effect.annotateLogs({ leaseTicks: policy.leaseTicks, deliveryTimeoutMillis: Duration.toMillis(settings.deliveryTimeout) })
              )
            }),
            Effect.catchAllCause((cause) => Effect.logWarning("reading the store's policy failed", cause))
          )
        }
      })

      // Daemon fibers: interrupting `run` must not interrupt a step half-way; shutdown below does
      // it in order (stop claiming, wait the grace period, then interrupt).
      const fibers = yield* Effect.forEach(
        Array.from({ length: workerFibers }, (_, i) => i),
        (i) => Effect.forkDaemon(worker(i))
      )
      const sampling = yield* Effect.forkDaemon(sampler)
      const pruning = yield* Effect.forkDaemon(pruner)
      const policyReading = yield* Effect.forkDaemon(policyReader)
      const telling = yield* Effect.forkDaemon(teller)
      const retryTelling = yield* Effect.forkDaemon(retryTeller)
      yield* Effect.logInfo("relay started").pipe(Effect.annotateLogs({ workers: settings.workers, batchSize: settings.batchSize }))
      return yield* Effect.never.pipe(
        Effect.onInterrupt(() =>
          Effect.gen(function*() {
            yield* Deferred.succeed(stopping, undefined)
            // Finalizers run uninterruptibly; the join must stay interruptible or the grace timeout
            // could never cut it short.
            const finished = yield* Effect.interruptible(Fiber.joinAll(fibers)).pipe(
              Effect.timeout(settings.shutdownGrace),
              Effect.isSuccess
            )
            if (!finished) yield* Effect.logWarning("relay shutdown grace elapsed; interrupting in-flight steps")
            yield* Fiber.interruptAll([...fibers, sampling, pruning, policyReading, telling, retryTelling])
            yield* Effect.flatMap(Queue.takeAll(told), (rest) => Effect.forEach(rest, tellQuarantine, { discard: true }))
            yield* tellRetries
            yield* Effect.logInfo("relay stopped")
          })
        )
      )
    }).pipe(Effect.scoped)

  return { step, stepBatch, run }
})

/** The worker service. */
export class Relay extends Context.Tag("fair-relay/Relay")<Relay, RelayService>() {
  /** A layer providing `Relay` from `RelayQueue` and `Transport`. */
  static readonly layer: Layer.Layer<Relay, never, RelayQueue | Transport> = Layer.effect(Relay, make)
}
