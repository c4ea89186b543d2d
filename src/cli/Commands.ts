/**
 * The `fair-relay` operator CLI: inspect a queue store, redrive a quarantined head with an audited
 * reason, enqueue, run the worker, run the demo. Read commands open the store read-only; every
 * command refuses a path that is not a fair-relay queue store before anything can write to it.
 */
import { Args, Command, Options } from "@effect/cli"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import { NodeHttpClient } from "@effect/platform-node"
import { Cause, Config, Console, Duration, Effect, Exit, Layer, Option, Ref } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { MissingReason } from "../domain/Errors.js"
import type { InvalidInput } from "../domain/Errors.js"
import type { DeliveryReply, SettleOutcome } from "../domain/Outcomes.js"
import { isBlankReason } from "../domain/Protocol.js"
import type { EventRecord, EventState, FlowRecord } from "../domain/Records.js"
import * as HttpTransport from "../http/HttpTransport.js"
import * as SqliteInbox from "../layers/SqliteInbox.js"
import * as Counter from "../sample/Counter.js"
import { Relay } from "../services/Relay.js"
import type { RunOptions } from "../services/Relay.js"
import { RelayQueue } from "../services/RelayQueue.js"
import type { RelayQueueService, SettleInput, TokenInput } from "../services/RelayQueue.js"
import { Transport } from "../services/Transport.js"
import { CliFailure, failure, report, usage } from "./Errors.js"
import * as Format from "./Format.js"
import * as Store from "./Store.js"

/** The environment variable naming the queue store when `--db` is not given. */
export const DbEnv = "FAIR_RELAY_DB"

const States: ReadonlyArray<EventState> = ["ready", "inflight", "acked", "quarantined"]

// ---------------------------------------------------------------------------------------------
// Shared options
// ---------------------------------------------------------------------------------------------

const db = Options.text("db").pipe(
  Options.withPseudoName("PATH"),
  Options.withDescription(`The queue store (a SQLite file). Defaults to $${DbEnv}.`),
  Options.optional
)

const json = Options.boolean("json").pipe(Options.withDescription("Print one JSON document instead of tables."))

const shared = { db, json }

/** The root command: `fair-relay [--db PATH] [--json] <command>`; the options may also follow the command. */
const root = Command.make("fair-relay", shared).pipe(
  Command.withDescription("Operate a fair-relay queue: inspect it, redrive quarantined heads, enqueue, run the worker.")
)

interface Context {
  readonly db: string
  readonly json: boolean
}

/** The store and output mode, from the command's options, the root's, then the environment. */
const context = (options: { readonly db: Option.Option<string>; readonly json: boolean }) =>
  Effect.gen(function*() {
    const top = yield* root
    const fromEnv = yield* Config.option(Config.nonEmptyString(DbEnv)).pipe(Effect.orElseSucceed(() => Option.none<string>()))
    const file = options.db.pipe(Option.orElse(() => top.db), Option.orElse(() => fromEnv))
    if (Option.isNone(file)) {
      return yield* usage("NoStore", `no queue store given: pass --db PATH or set ${DbEnv}`)
    }
    return { db: file.value, json: options.json || top.json } satisfies Context
  })

const print = (text: string) => Console.log(text)

const printJson = (value: unknown) => Console.log(Format.json(value))

/** Parses an option's text, failing as a usage error @effect/cli prints. */
const parsed = <A>(name: string, parse: (text: string) => A | string) => (text: string) => {
  const result = parse(text)
  return typeof result === "string"
    ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name}: ${result}`)))
    : Effect.succeed(result)
}

const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** `1500` (milliseconds), `500ms`, `30s`, `2m`, `1h`, or Effect's `"30 seconds"`. */
export const parseDuration = (text: string): Duration.Duration | string => {
  const trimmed = text.trim()
  if (/^\d+$/.test(trimmed)) return Duration.millis(Number(trimmed))
  const short = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)$/.exec(trimmed)
  if (short !== null) return Duration.millis(Number(short[1]) * units[short[2]!]!)
  const decoded = Duration.decodeUnknown(trimmed)
  return Option.isSome(decoded) && Duration.isFinite(decoded.value)
    ? decoded.value
    : `${JSON.stringify(text)} is not a duration (e.g. 500ms, 30s, 2m, "30 seconds")`
}

const duration = (name: string, fallback: string, description: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription(`${description} (default ${fallback}; e.g. 500ms, 30s, 2m, "30 seconds").`),
    Options.withDefault(fallback),
    Options.mapEffect(parsed(name, parseDuration))
  )

const limit = Options.integer("limit").pipe(
  Options.withPseudoName("N"),
  Options.withDescription("At most N rows (1 to 10000, default 100)."),
  Options.withDefault(100)
)

// ---------------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------------

const status = Command.make("status", shared, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    const stats = yield* queue.stats
    if (json) return yield* printJson({ db, ...stats })
    const oldest = stats.eligibleHeads === 0 ? "-" : Format.age(stats.oldestEligibleAgeMillis)
    yield* print(
      [
        Format.fields([["queue store", db], ["tick", Format.tick(stats.clock.tick)], ["ticket", stats.clock.ticket]]),
        "",
        Format.table(["STATE", "EVENTS"], States.map((state) => [state, stats.byState[state]])),
        "",
        Format.fields([["eligible heads", stats.eligibleHeads], ["oldest eligible head", oldest]]),
        ...(stats.byState.quarantined === 0
          ? []
          : ["", `${stats.byState.quarantined} quarantined: fair-relay events --state quarantined`])
      ].join("\n")
    )
  }))).pipe(Command.withDescription("Counts per state, eligible heads, and how long the oldest eligible head has waited."))

// ---------------------------------------------------------------------------------------------
// flows
// ---------------------------------------------------------------------------------------------

/** Every event in `state` (only heads are ever in flight or quarantined, so these are few). */
const allInState = (queue: RelayQueueService, state: EventState) =>
  Effect.gen(function*() {
    const all: Array<EventRecord> = []
    let afterEventId: string | undefined
    for (;;) {
      const page = yield* queue.events({ state, afterEventId, limit: 10_000 })
      all.push(...page)
      if (page.length < 10_000) return all
      afterEventId = page[page.length - 1]!.eventId
    }
  })

/** A flow's head state: quarantined and in-flight heads are listed; a flow without a head is drained. */
const headStates = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    const inflight = new Set((yield* allInState(queue, "inflight")).map((e) => e.flowId as string))
    const quarantined = new Set((yield* allInState(queue, "quarantined")).map((e) => e.flowId as string))
    return (flow: FlowRecord): EventState | null =>
      flow.headSeq === null
        ? null
        : quarantined.has(flow.flowId)
        ? "quarantined"
        : inflight.has(flow.flowId)
        ? "inflight"
        : "ready"
  })

const flows = Command.make("flows", {
  ...shared,
  limit,
  after: Options.text("after").pipe(
    Options.withPseudoName("FLOW"),
    Options.withDescription("List flows whose id sorts after FLOW (the last one of the previous page)."),
    Options.optional
  )
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    const page = yield* queue.flows({ after: Option.getOrUndefined(options.after), limit: options.limit })
    const stateOf = yield* headStates(queue)
    const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    const rows = page.map((flow) => ({ ...flow, headState: stateOf(flow) }))
    if (json) return yield* printJson(rows)
    if (rows.length === 0) return yield* print("no flows")
    const headText = (flow: (typeof rows)[number]) =>
      flow.headState === "ready" && flow.eligibleAt !== null && flow.eligibleAt > now
        ? `ready, due in ${Format.age(flow.eligibleAt - now)}`
        : flow.headState
    yield* print(Format.table(
      ["FLOW", "LAST SEQ", "HEAD SEQ", "HEAD STATE", "SERVED", "WEIGHT"],
      rows.map((flow) => [flow.flowId, flow.seq, flow.headSeq, headText(flow), flow.served, flow.weight])
    ))
    if (rows.length === options.limit) yield* print(`… more: --after ${rows[rows.length - 1]!.flowId}`)
  }))).pipe(Command.withDescription("Per flow: last seq, head seq and state, served (its place in the rotation), weight."))

// ---------------------------------------------------------------------------------------------
// events
// ---------------------------------------------------------------------------------------------

const events = Command.make("events", {
  ...shared,
  state: Options.choice("state", States).pipe(Options.withDescription("Only events in this state."), Options.optional),
  flow: Options.text("flow").pipe(Options.withPseudoName("FLOW"), Options.withDescription("Only events of this flow."), Options.optional),
  limit,
  after: Options.text("after").pipe(
    Options.withPseudoName("EVENT"),
    Options.withDescription("List events whose id sorts after EVENT (the last one of the previous page)."),
    Options.optional
  )
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    const list = yield* queue.events({
      state: Option.getOrUndefined(options.state),
      flowId: Option.getOrUndefined(options.flow),
      afterEventId: Option.getOrUndefined(options.after),
      limit: options.limit
    })
    if (json) return yield* printJson(list)
    if (list.length === 0) return yield* print("no events")
    yield* print(Format.table(
      ["EVENT", "FLOW", "SEQ", "STATE", "GEN", "ATTEMPTS", "LIFETIME", "REASON"],
      list.map((e) => [e.eventId, e.flowId, e.seq, e.state, e.generation, e.attempts, e.lifetimeAttempts, e.reason])
    ))
    if (list.length === options.limit) yield* print(`… more: --after ${list[list.length - 1]!.eventId}`)
  }))).pipe(Command.withDescription("Events in event-id order, filtered by state and flow, a page at a time."))

// ---------------------------------------------------------------------------------------------
// show
// ---------------------------------------------------------------------------------------------

const eventArg = Args.text({ name: "EVENT" }).pipe(Args.withDescription("The event id."))

const show = Command.make("show", { ...shared, event: eventArg }, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    const { audit, event } = yield* queue.inspect(options.event)
    if (json) return yield* printJson({ event, audit })
    const lines = [
      Format.fields([
        ["event", event.eventId],
        ["flow", event.flowId],
        ["seq", event.seq],
        ["state", event.state],
        ["reason", event.reason],
        ["generation", event.generation],
        ["attempts", `${event.attempts} this round, ${event.lifetimeAttempts} in total`],
        ["next at", Format.tick(event.nextAt)],
        ["lease until", Format.tick(event.leaseUntil)],
        ["body", Format.body(event.body)]
      ]),
      "",
      audit.length === 0
        ? "audit: no redrive recorded"
        : [`audit: ${audit.length} redrive${audit.length === 1 ? "" : "s"}`, auditTable(audit)].join("\n")
    ]
    if (event.state === "quarantined") {
      lines.push("", `release it: fair-relay redrive ${event.eventId} --generation ${event.generation} --reason "…"`)
    }
    yield* print(lines.join("\n"))
  }))).pipe(Command.withDescription("One event: its record, attempts, the reason it is stuck, and its audit rows."))

const auditTable = (rows: ReadonlyArray<{ tick: number; eventId: string; generation: number; actor: string | null; reason: string }>) =>
  Format.table(
    ["TICK", "EVENT", "GEN", "ACTOR", "REASON"],
    rows.map((row) => [Format.tick(row.tick), row.eventId, row.generation, row.actor, row.reason])
  )

// ---------------------------------------------------------------------------------------------
// redrive
// ---------------------------------------------------------------------------------------------

/** The OS user, recorded as the redrive's actor unless `--by` says otherwise. */
const osUser = (): string => {
  try {
    return os.userInfo().username
  } catch {
    return process.env.USER ?? process.env.USERNAME ?? "unknown"
  }
}

const redrive = Command.make("redrive", {
  ...shared,
  event: eventArg,
  generation: Options.integer("generation").pipe(
    Options.withPseudoName("N"),
    Options.withDescription("The generation you inspected (fair-relay show EVENT); refused if the event has moved on.")
  ),
  reason: Options.text("reason").pipe(Options.withDescription("Why the event may go again; recorded in the audit row.")),
  by: Options.text("by").pipe(
    Options.withPseudoName("WHO"),
    Options.withDescription("Who decides; recorded in the audit row (default: the OS user name)."),
    Options.optional
  )
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    // Checked before the store is opened, so a blank reason is reported whatever the path.
    if (isBlankReason(options.reason)) return yield* new MissingReason({ eventId: options.event })
    const actor = Option.getOrElse(options.by, osUser)
    const queue = yield* Store.openWriter(db)
    const result = yield* queue.redrive({
      eventId: options.event,
      expectedGeneration: options.generation,
      reason: options.reason,
      actor
    })
    if (json) return yield* printJson({ ...result, eventId: options.event, reason: options.reason, actor })
    yield* print(
      `redriven ${options.event}: generation ${options.generation} → ${result.generation}, ready now (by ${actor}: ${options.reason})`
    )
  }))).pipe(Command.withDescription("Release a quarantined head under a new generation, with an audited reason (the only exit from quarantine)."))

// ---------------------------------------------------------------------------------------------
// audit
// ---------------------------------------------------------------------------------------------

const audit = Command.make("audit", {
  ...shared,
  event: Options.text("event").pipe(Options.withPseudoName("EVENT"), Options.withDescription("Only this event's rows."), Options.optional),
  limit
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    const rows = yield* queue.audit({ eventId: Option.getOrUndefined(options.event), limit: options.limit })
    if (json) return yield* printJson(rows)
    yield* print(rows.length === 0 ? "no redrive recorded" : auditTable(rows))
  }))).pipe(Command.withDescription("Redrive decisions in the order they were made: when, which event, generation, who, why."))

// ---------------------------------------------------------------------------------------------
// enqueue
// ---------------------------------------------------------------------------------------------

const parseJson = (text: string): { readonly value: unknown } | string => {
  try {
    return { value: JSON.parse(text) as unknown }
  } catch (error) {
    return `not valid JSON (${error instanceof Error ? error.message : String(error)})`
  }
}

const enqueue = Command.make("enqueue", {
  ...shared,
  flow: Options.text("flow").pipe(Options.withPseudoName("FLOW"), Options.withDescription("The flow (ordering key).")),
  id: Options.text("id").pipe(Options.withPseudoName("ID"), Options.withDescription("The event id (idempotency key).")),
  body: Options.text("body").pipe(
    Options.withPseudoName("JSON"),
    Options.withDescription("The event body, a JSON document."),
    Options.mapEffect(parsed("body", parseJson))
  ),
  weight: Options.integer("weight").pipe(
    Options.withPseudoName("W"),
    Options.withDescription("Sets the flow's weight (1 to 1000000)."),
    Options.optional
  ),
  create: Options.boolean("create").pipe(Options.withDescription("Create the store if the file does not exist."))
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openWriter(db, { create: options.create })
    const result = yield* queue.enqueue({
      eventId: options.id,
      flowId: options.flow,
      body: options.body.value,
      weight: Option.getOrUndefined(options.weight)
    })
    if (json) return yield* printJson({ ...result, eventId: options.id, flowId: options.flow })
    yield* print(
      result._tag === "Enqueued"
        ? `enqueued ${options.id} as ${options.flow}#${result.seq}`
        : `${options.id} was already enqueued as ${options.flow}#${result.seq} with this body: nothing changed`
    )
  }))).pipe(Command.withDescription("Store an event at the next seq of its flow (idempotent on the id). A missing store is created only with --create."))

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

const outcomeText = (outcome: SettleOutcome): string => {
  switch (outcome._tag) {
    case "Quarantined":
      return `Quarantined (${outcome.reason})`
    case "RetryScheduled":
      return `RetryScheduled (next at ${Format.tick(outcome.nextAt)})`
    default:
      return outcome._tag
  }
}

/** A queue whose settles report each outcome (how `run` shows what it does). */
const observed = (
  queue: RelayQueueService,
  onOutcome: (token: TokenInput, reply: DeliveryReply, outcome: SettleOutcome) => Effect.Effect<void>
): RelayQueueService => ({
  ...queue,
  settle: (token, reply) => Effect.tap(queue.settle(token, reply), (outcome) => onOutcome(token, reply, outcome)),
  settleBatch: (items: ReadonlyArray<SettleInput>) =>
    Effect.tap(queue.settleBatch(items), (outcomes) =>
      Effect.forEach(outcomes, (outcome, i) => onOutcome(items[i]!.token, items[i]!.reply, outcome), { discard: true }))
})

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

const run = Command.make("run", {
  ...shared,
  http: Options.text("http").pipe(
    Options.withPseudoName("URL"),
    Options.withDescription("Deliver by HTTP POST to this receiver endpoint."),
    Options.optional
  ),
  inbox: Options.text("inbox").pipe(
    Options.withPseudoName("PATH"),
    Options.withDescription("Deliver to the sample counter receiver, in this process, on its own SQLite file (created if missing)."),
    Options.optional
  ),
  maxDelta: Options.integer("max-delta").pipe(
    Options.withPseudoName("N"),
    Options.withDescription("The sample receiver's limit: larger deltas are refused (Rejected unsupported_delta). Default 1000."),
    Options.optional
  ),
  workers: Options.integer("workers").pipe(Options.withPseudoName("N"), Options.withDescription("Concurrent workers (default 1)."), Options.withDefault(1)),
  batch: Options.integer("batch").pipe(
    Options.withPseudoName("N"),
    Options.withDescription("Claim and settle up to N heads per transaction (default 1)."),
    Options.withDefault(1)
  ),
  poll: duration("poll", "1s", "Longest sleep when nothing is eligible"),
  deliveryTimeout: duration("delivery-timeout", "10s", "A delivery without a reply by then is settled as Retry; shorter than the lease"),
  lease: duration("lease", "30s", "How long a claim holds a head"),
  backoffBase: duration("backoff-base", "1s", "First retry delay, doubled on each failure"),
  backoffCap: duration("backoff-cap", "1m", "Largest retry delay"),
  retryBudget: Options.integer("retry-budget").pipe(
    Options.withPseudoName("N"),
    Options.withDescription("Transient failures per round before a head is quarantined (default 3)."),
    Options.withDefault(3)
  ),
  shutdownGrace: duration("shutdown-grace", "10s", "On SIGINT/SIGTERM, how long in-flight deliveries may finish"),
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
    if (Duration.lessThanOrEqualTo(options.lease, options.deliveryTimeout)) {
      return yield* usage(
        "InvalidOption",
        `--lease (${Duration.format(options.lease)}) must be longer than --delivery-timeout (${Duration.format(options.deliveryTimeout)})`
      )
    }
    const policy = {
      leaseTicks: Duration.toMillis(options.lease),
      retryBudget: options.retryBudget,
      backoffBase: Duration.toMillis(options.backoffBase),
      backoffCap: Duration.toMillis(options.backoffCap)
    }

    const counts = yield* Ref.make<Record<string, number>>({})
    const onOutcome = (token: TokenInput, reply: DeliveryReply, outcome: SettleOutcome) =>
      Effect.zipRight(
        Ref.update(counts, (c) => ({ ...c, [outcome._tag]: (c[outcome._tag] ?? 0) + 1 })),
        json ? Effect.void : print(`${token.eventId}  generation ${token.generation}  ${replyText(reply)} → ${outcomeText(outcome)}`)
      )

    const Queue = Layer.scoped(RelayQueue, Effect.map(Store.openWriter(db, { policy }), (queue) => observed(queue, onOutcome)))
    const Deliveries: Layer.Layer<Transport, CliFailure | InvalidInput> = Option.isSome(options.http)
      ? HttpTransport.layer({
        url: options.http.value,
        timeout: Duration.min(options.deliveryTimeout, HttpTransport.DefaultTimeout)
      }).pipe(Layer.provide(NodeHttpClient.layerUndici))
      : Transport.layerInbox.pipe(Layer.provide(sampleReceiver(Option.getOrElse(options.inbox, () => ""), Option.getOrElse(options.maxDelta, () => 1000))))

    const runOptions: RunOptions = {
      workers: options.workers,
      batchSize: options.batch,
      pollInterval: options.poll,
      deliveryTimeout: options.deliveryTimeout,
      shutdownGrace: options.shutdownGrace,
      metricsInterval: null
    }

    const summary = Effect.gen(function*() {
      const queue = yield* RelayQueue
      const stats = yield* queue.stats
      const outcomes = yield* Ref.get(counts)
      if (json) return yield* printJson({ db, outcomes, stats })
      const done = Object.entries(outcomes).map(([tag, n]) => `${n} ${tag}`).join(", ")
      yield* print(
        `${options.untilIdle ? "idle" : "stopped"}: ${done === "" ? "nothing delivered" : done}; queue now ${
          States.map((state) => `${stats.byState[state]} ${state}`).join(", ")
        }`
      )
    })

    const work = Effect.gen(function*() {
      const relay = yield* Relay
      const queue = yield* RelayQueue
      if (options.untilIdle) {
        yield* Effect.raceFirst(relay.run(runOptions), untilDrained(queue))
        yield* summary
      } else {
        yield* relay.run(runOptions).pipe(
          Effect.onInterrupt(() => Effect.ignore(summary))
        )
      }
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

const demo = Command.make("demo", {
  ...shared,
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

// ---------------------------------------------------------------------------------------------
// The application
// ---------------------------------------------------------------------------------------------

/** The command tree. */
export const command = root.pipe(Command.withSubcommands([status, flows, events, show, redrive, audit, enqueue, run, demo]))

const version = (): string => {
  try {
    const manifest = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: unknown }
    return typeof manifest.version === "string" ? manifest.version : "unknown"
  } catch {
    return "unknown"
  }
}

/** Parses `argv` (node, script, args…) and runs the command. */
export const cli = Command.run(command, { name: "fair-relay", version: version() })

/**
 * Runs the CLI and returns the process exit code: 0, 1 (the store or the operation refused), 2
 * (usage). A failure is printed as one line on stderr first. Interruption passes through.
 */
export const main = (argv: ReadonlyArray<string>) =>
  cli(argv).pipe(
    Effect.exit,
    Effect.flatMap((exit) => {
      if (Exit.isSuccess(exit)) return Effect.succeed(0)
      if (Cause.isInterruptedOnly(exit.cause)) return Effect.failCause(exit.cause)
      const { exitCode, line } = report(exit.cause)
      return Effect.as(line === undefined ? Effect.void : Console.error(line), exitCode)
    })
  )
