/**
 * The commands that run something: `run` (the worker daemon, against an HTTP endpoint or the
 * in-process sample receiver) and `demo` (the scenario demo, in a child process).
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { SqlError } from "@effect/sql/SqlError"
import { Config, Deferred, Duration, Effect, Layer, Option, ParseResult, Predicate, Redacted, Ref, Schema } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { InvalidInput } from "../domain/Errors.js"
import type { DeliveryReply, SettleOutcome } from "../domain/Outcomes.js"
import type { PolicyInput } from "../domain/Policy.js"
import * as HttpTransport from "../http/HttpTransport.js"
import * as SqliteInbox from "../layers/SqliteInbox.js"
import * as Counter from "../sample/Counter.js"
import { Relay } from "../services/Relay.js"
import type { RunOptions } from "../services/Relay.js"
import { MaxBatchSize, RelayQueue } from "../services/RelayQueue.js"
import type { RelayQueueService, SettleInput, TokenInput } from "../services/RelayQueue.js"
import { Transport } from "../services/Transport.js"
import { context, duration, integer, print, printJson, schemaOption, shared, States } from "./Common.js"
import { CliFailure, failure, usage } from "./Errors.js"
import * as Format from "./Format.js"
import * as Store from "./Store.js"
import { received } from "./Signals.js"

// ---------------------------------------------------------------------------------------------
// run
// ---------------------------------------------------------------------------------------------

const replyText = (reply: DeliveryReply): string => {
  switch (reply._tag) {
    case "Rejected":
      return `Rejected ${reply.code}`
    case "Retry":
      return `Retry (${reply.reason})`
    case "Gap":
      return `Gap (receiver expects seq ${reply.expected})`
    default:
      return reply._tag
  }
}

const outcomeText = (outcome: SettleOutcome, now: number): string => {
  switch (outcome._tag) {
    case "Quarantined":
      return `Quarantined (${outcome.reason})`
    case "RetryScheduled":
      return `RetryScheduled (again in ${Format.age(Math.max(0, outcome.nextAt - now))})`
    default:
      return outcome._tag
  }
}

/**
 * Failures a worker cannot outlive: the store refuses writes (read-only file or directory,
 * permissions, a store opened read-only), is no database, or the clock is behind the store's.
 * The daemon's loop logs and retries every failure (right for a busy lock or a dropped
 * connection); these would repeat forever, so `run` stops on the first one.
 */
const fatalCodes = new Set([
  "SQLITE_READONLY", "SQLITE_READONLY_DIRECTORY", "SQLITE_READONLY_DBMOVED", "SQLITE_READONLY_ROLLBACK", "SQLITE_READONLY_RECOVERY",
  "SQLITE_READONLY_CANTINIT", "SQLITE_READONLY_CANTLOCK", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH", "SQLITE_NOTADB",
  "SQLITE_CORRUPT", "SQLITE_IOERR_WRITE",
  // PostgreSQL: insufficient privilege, read-only transaction, no such database, bad credentials.
  "42501", "25006", "3D000", "28000", "28P01"
])

/** Whether `error` would recur on every try (see `fatalCodes`). */
export const isFatal = (error: unknown): boolean => {
  if (typeof error !== "object" || error === null || !("_tag" in error)) return false
  if (error._tag === "ClockRegressed") return true
  if (!(error instanceof SqlError)) return false
  const cause = error.cause
  return (Predicate.hasProperty(cause, "_tag") && cause._tag === "ReadonlyStore") ||
    (Predicate.hasProperty(cause, "code") && typeof cause.code === "string" && fatalCodes.has(cause.code))
}

/** How `run` reports the failure that stopped it: one line, the store named, the driver's reason kept. */
const fatalFailure = (db: string, error: unknown): CliFailure => {
  const tag = Predicate.hasProperty(error, "_tag") ? error._tag : undefined
  const message = String((Predicate.hasProperty(error, "message") ? error.message : undefined) ?? error)
  const cause = Predicate.hasProperty(error, "cause") ? error.cause : undefined
  const reason = cause instanceof Error && !message.includes(cause.message) ? `${message}: ${cause.message}` : message
  return tag === "ClockRegressed"
    ? failure("ClockRegressed", `the worker stopped: ${reason} (see fair-relay clock)`)
    : failure(String(tag ?? "Error"), `the worker stopped: ${Store.display(db)} refused a write: ${reason}`)
}

/**
 * A queue whose settles report each outcome (how `run` shows what it does), and whose writes
 * complete `fatal` with the first failure that would repeat forever.
 */
const observed = (
  queue: RelayQueueService,
  onOutcome: (token: TokenInput, reply: DeliveryReply, outcome: SettleOutcome) => Effect.Effect<void>,
  fatal: Deferred.Deferred<never, unknown>
): RelayQueueService => {
  const watch = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.tapError(effect, (error) => (isFatal(error) ? Deferred.fail(fatal, error) : Effect.void))
  const report = (items: ReadonlyArray<SettleInput>) => (outcomes: ReadonlyArray<SettleOutcome>) =>
    Effect.forEach(outcomes, (outcome, i) => onOutcome(items[i]!.token, items[i]!.reply, outcome), { discard: true })
  return {
    ...queue,
    claim: watch(queue.claim),
    claimBatch: (limit) => watch(queue.claimBatch(limit)),
    claimUpTo: (limit) => watch(queue.claimUpTo(limit)),
    settle: (token, reply) => watch(Effect.tap(queue.settle(token, reply), (outcome) => onOutcome(token, reply, outcome))),
    settleBatch: (items: ReadonlyArray<SettleInput>) => watch(Effect.tap(queue.settleBatch(items), report(items))),
    settleAndClaim: (items: ReadonlyArray<SettleInput>, limit: number) =>
      watch(Effect.tap(queue.settleAndClaim(items, limit), ({ outcomes }) => report(items)(outcomes)))
  }
}

/** Whether no flow has a head that is or will become eligible: everything acked or quarantined. */
const drained = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    let after: string | undefined
    for (;;) {
      const page = yield* queue.flows({ after, limit: 10_000 })
      if (page.some((flow) => flow.eligibleAt !== null)) return false
      if (page.length < 10_000) return true
      after = page[page.length - 1]!.flowId
    }
  })

const untilDrained = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    while (!(yield* drained(queue))) yield* Effect.sleep(Duration.millis(200))
  })

/** The sample receiver (a per-flow counter) in this process, on its own SQLite file. */
const sampleReceiver = (file: string, maxDelta: number) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      yield* Store.checkInbox(file)
      const limit = yield* Ref.make(maxDelta)
      return SqliteInbox.layer({ filename: file, business: Counter.business(limit) }).pipe(
        Layer.mapError((error) => failure(error._tag, `cannot open the receiver store ${JSON.stringify(file)}: ${error.message}`))
      )
    })
  )

/** An absolute http(s) URL, checked before anything is opened. */
const HttpUrl: Schema.Schema<string, string> = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: (text, _, ast) => {
    let url: URL
    try {
      url = new URL(text)
    } catch {
      return ParseResult.fail(new ParseResult.Type(ast, text, `${JSON.stringify(text)} is not a URL (e.g. http://127.0.0.1:8080/deliveries)`))
    }
    return url.protocol === "http:" || url.protocol === "https:"
      ? ParseResult.succeed(url.toString())
      : ParseResult.fail(new ParseResult.Type(ast, text, `${JSON.stringify(text)} is not an http:// or https:// URL`))
  },
  encode: ParseResult.succeed
})

/** The environment variable `run --http` reads its signing secret(s) from. */
export const WebhookSecretVariable = "FAIR_RELAY_WEBHOOK_SECRET"

/** The signing secrets of `run --http`, from the environment; none only with `--unsigned`. */
const webhookSecrets = (unsigned: boolean) =>
  Effect.gen(function*() {
    const secret = yield* Config.option(Config.redacted(WebhookSecretVariable)).pipe(
      Effect.mapError((error) => usage("InvalidOption", `${WebhookSecretVariable}: ${error.message}`))
    )
    const given = Option.filter(secret, (value) => Redacted.value(value).trim() !== "")
    if (Option.isNone(given) && !unsigned) {
      return yield* usage(
        "MissingWebhookSecret",
        `run --http signs every delivery: set ${WebhookSecretVariable} to the receiver's secret (whsec_…, space-separated for a rotation), or pass --unsigned`
      )
    }
    if (Option.isSome(given) && unsigned) {
      return yield* usage("InvalidOption", `--unsigned contradicts ${WebhookSecretVariable}, which is set`)
    }
    return Option.getOrUndefined(given)
  })

/** `run`: the worker daemon. */
export const run = Command.make("run", {
  ...shared,
  http: schemaOption("http", "URL", "Deliver by HTTP POST to this receiver endpoint (http:// or https://).", HttpUrl).pipe(Options.optional),
  inbox: Options.text("inbox").pipe(
    Options.withPseudoName("PATH"),
    Options.withDescription("Deliver to the sample counter receiver, in this process, on its own SQLite file (created if missing)."),
    Options.optional
  ),
  maxDelta: integer("max-delta", "N", "The sample receiver's limit: larger deltas are refused (Rejected unsupported_delta). Default 1000.", 0)
    .pipe(Options.optional),
  workers: integer("workers", "N", "Concurrent workers (default 1).", 1, MaxBatchSize).pipe(Options.withDefault(1)),
  batch: integer("batch", "N", "Claim and settle up to N heads per transaction (default 1).", 1, MaxBatchSize).pipe(Options.withDefault(1)),
  poll: duration("poll", "Longest sleep when nothing is eligible; default 1s").pipe(Options.withDefault(Duration.seconds(1))),
  deliveryTimeout: duration("delivery-timeout", "A delivery without a reply by then is settled as Retry; shorter than the lease; default 10s")
    .pipe(Options.withDefault(Duration.seconds(10))),
  lease: duration("lease", "How long a claim holds a head; default: the store's").pipe(Options.optional),
  backoffBase: duration("backoff-base", "First retry delay, doubled on each failure; default: the store's").pipe(Options.optional),
  backoffCap: duration("backoff-cap", "Largest retry delay; default: the store's").pipe(Options.optional),
  retryBudget: integer("retry-budget", "N", "Transient failures per round before a head is quarantined (default: the store's).", 1)
    .pipe(Options.optional),
  retryLogInterval: duration("retry-log-interval", "How often retries are told: one line per flow that had retries in the interval, not one per delivery; default 10s")
    .pipe(Options.optional),
  shutdownGrace: duration("shutdown-grace", "On SIGINT/SIGTERM, how long in-flight deliveries may finish; default 10s")
    .pipe(Options.withDefault(Duration.seconds(10))),
  unsigned: Options.boolean("unsigned").pipe(
    Options.withDescription(
      `With --http: send deliveries without a webhook signature. Otherwise the signing secret(s) come from ${WebhookSecretVariable} (whsec_…, space-separated for a rotation), never from the command line.`
    )
  ),
  untilIdle: Options.boolean("until-idle").pipe(
    Options.withDescription("Exit once nothing is left to deliver: no head is or will become eligible (all acked or quarantined).")
  )
}, (options) =>
  Effect.gen(function*() {
    const { db, json } = yield* context(options)
    if (Option.isSome(options.http) === Option.isSome(options.inbox)) {
      return yield* usage("NoReceiver", "run needs exactly one receiver: --http URL or --inbox PATH")
    }
    if (Option.isSome(options.maxDelta) && Option.isNone(options.inbox)) {
      return yield* usage("InvalidOption", "--max-delta applies to the sample receiver (--inbox) only")
    }
    if (Option.isSome(options.inbox) && path.resolve(options.inbox.value) === path.resolve(db)) {
      return yield* usage("InvalidOption", "--inbox must be another file than the queue store: the receiver keeps its own database")
    }
    if (Option.isSome(options.lease) && Duration.lessThanOrEqualTo(options.lease.value, options.deliveryTimeout)) {
      return yield* usage(
        "InvalidOption",
        `--lease (${Duration.format(options.lease.value)}) must be longer than --delivery-timeout (${Duration.format(options.deliveryTimeout)})`
      )
    }
    if (options.unsigned && Option.isNone(options.http)) {
      return yield* usage("InvalidOption", "--unsigned applies to --http only")
    }
    // Secrets never travel on the command line (other users see it in `ps`): the environment only.
    const secrets = Option.isSome(options.http) ? yield* webhookSecrets(options.unsigned) : undefined
    // Before any layer is built: a missing or foreign queue store must not get a receiver file created next to it.
    yield* Store.check(db)
    // Only the settings given: the store keeps its protocol settings, and a process adopts them.
    const millis = (d: Option.Option<Duration.Duration>) => Option.getOrUndefined(Option.map(d, Duration.toMillis))
    const policy: PolicyInput = Object.fromEntries(
      Object.entries({
        leaseTicks: millis(options.lease),
        retryBudget: Option.getOrUndefined(options.retryBudget),
        backoffBase: millis(options.backoffBase),
        backoffCap: millis(options.backoffCap)
      }).filter(([, value]) => value !== undefined)
    )

    const counts = yield* Ref.make<Record<string, number>>({})
    const fatal = yield* Deferred.make<never, unknown>()
    const onOutcome = (token: TokenInput, reply: DeliveryReply, outcome: SettleOutcome) =>
      Effect.zipRight(
        Ref.update(counts, (c) => ({ ...c, [outcome._tag]: (c[outcome._tag] ?? 0) + 1 })),
        json ? Effect.void : Effect.flatMap(
          Effect.clockWith((clock) => clock.currentTimeMillis),
          // The reply's code and reason are the receiver's text: one cell each, never an escape sequence.
          (now) => print(`${token.eventId}  generation ${token.generation}  ${Format.cell(replyText(reply))} → ${Format.cell(outcomeText(outcome, now))}`)
        )
      )

    const Queue = Layer.scoped(
      RelayQueue,
      Effect.map(Store.openWriter(db, { policy: Object.keys(policy).length === 0 ? undefined : policy }), (queue) =>
        observed(queue, onOutcome, fatal))
    )
    const Deliveries: Layer.Layer<Transport, CliFailure | InvalidInput> = Option.isSome(options.http)
      ? HttpTransport.layer({
        url: options.http.value,
        secrets,
        unsigned: options.unsigned,
        timeout: Duration.min(options.deliveryTimeout, HttpTransport.DefaultTimeout)
      }).pipe(
        Layer.mapError((error) => (error._tag === "InvalidInput" ? error : usage(error._tag, error.message))),
        Layer.provide(NodeHttpClient.layerUndici)
      )
      : Transport.layerInbox.pipe(Layer.provide(sampleReceiver(Option.getOrElse(options.inbox, () => ""), Option.getOrElse(options.maxDelta, () => 1000))))

    const runOptions: RunOptions = {
      workers: options.workers,
      batchSize: options.batch,
      pollInterval: options.poll,
      deliveryTimeout: options.deliveryTimeout,
      shutdownGrace: options.shutdownGrace,
      metricsInterval: null,
      ...(Option.isSome(options.retryLogInterval) ? { retryLogInterval: options.retryLogInterval.value } : {})
    }

    const summary = (how: string) =>
      Effect.gen(function*() {
        const queue = yield* RelayQueue
        const stats = yield* queue.stats
        const outcomes = yield* Ref.get(counts)
        if (json) return yield* printJson({ db: Store.masked(db), stopped: how, outcomes, stats })
        const done = Object.entries(outcomes).map(([tag, n]) => `${n} ${tag}`).join(", ")
        yield* print(
          `${how}: ${done === "" ? "nothing delivered" : done}; queue now ${
            States.map((state) => `${stats.byState[state]} ${state}`).join(", ")
          }`
        )
      })

    const work = Effect.gen(function*() {
      const relay = yield* Relay
      const queue = yield* RelayQueue
      // The daemon, until a signal (interruption), idleness (--until-idle), or a failure that would repeat forever.
      const stop = Effect.catchAll(Deferred.await(fatal), (error) => Effect.fail(fatalFailure(db, error)))
      const daemon = Effect.raceFirst(relay.run(runOptions), stop)
      yield* (options.untilIdle ? Effect.raceFirst(daemon, untilDrained(queue)) : daemon).pipe(
        Effect.onInterrupt(() => Effect.ignore(summary(`stopped by ${received() ?? "interruption"}`)))
      )
      yield* summary(options.untilIdle ? "idle" : "stopped")
    })

    yield* work.pipe(Effect.provide(Relay.layer.pipe(Layer.provide(Deliveries), Layer.provideMerge(Queue))))
  })).pipe(Command.withDescription(
    "Run the worker until SIGINT/SIGTERM (or with --until-idle, until nothing is left), delivering to an HTTP endpoint or to the in-process sample receiver."
  ))

// ---------------------------------------------------------------------------------------------
// demo
// ---------------------------------------------------------------------------------------------

/** The repository root: `src/cli/` and `dist/cli/` both sit two levels down. */
const repositoryRoot = () => fileURLToPath(new URL("../../", import.meta.url))

/** `demo`: the scenario demo. */
export const demo = Command.make("demo", {
  only: Options.text("only").pipe(Options.withPseudoName("NAME"), Options.withDescription("Run one scenario."), Options.optional),
  jsonFile: Options.text("json-file").pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription("Also write machine-readable results to FILE."),
    Options.optional
  ),
  check: Options.boolean("check").pipe(Options.withDescription("Compare with the frozen results (scenarios/results.json); fail on any difference.")),
  keep: Options.boolean("keep").pipe(Options.withDescription("Leave the store files for inspection."))
}, (options) =>
  Effect.gen(function*() {
    const rootDir = repositoryRoot()
    const script = path.join(rootDir, "scenarios", "main.ts")
    if (!fs.existsSync(script)) {
      return yield* failure("DemoUnavailable", `the demo needs the repository's scenarios (${JSON.stringify(script)} is missing)`)
    }
    const tsx = yield* Effect.try({
      try: () => import.meta.resolve("tsx"),
      catch: () => failure("DemoUnavailable", "the demo runs TypeScript scenarios and needs tsx: run `npm ci` in the repository")
    })
    const args = [
      ...Option.match(options.only, { onNone: () => [], onSome: (name) => ["--only", name] }),
      ...Option.match(options.jsonFile, { onNone: () => [], onSome: (file) => ["--json", path.resolve(file)] }),
      ...(options.check ? ["--check"] : []),
      ...(options.keep ? ["--keep"] : [])
    ]
    const code = yield* Effect.async<number, CliFailure>((resume) => {
      const child = spawn(process.execPath, ["--import", tsx, script, ...args], { cwd: rootDir, stdio: "inherit" })
      child.on("error", (error) => resume(Effect.fail(failure("DemoUnavailable", `cannot start the demo: ${error.message}`))))
      child.on("exit", (exitCode, signal) => resume(Effect.succeed(exitCode ?? (signal === null ? 1 : 128))))
      return Effect.sync(() => child.kill("SIGTERM"))
    })
    if (code !== 0) return yield* new CliFailure({ code: "DemoFailed", message: `the demo exited with code ${code}`, exitCode: code })
  })).pipe(Command.withDescription("Run every protocol scenario of the article on real SQLite files (npm run demo)."))

