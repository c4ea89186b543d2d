/**
 * The `fair-relay` operator CLI: inspect a queue store, redrive a quarantined head with an audited
 * reason, enqueue, run the worker, run the demo. Read commands open the store read-only; every
 * command refuses a path that is not a fair-relay queue store before anything can write to it.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import { Cause, Console, Effect, Exit, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import { MissingReason } from "../domain/Errors.js"
import { MaxIdLength } from "../domain/Ids.js"
import { isBlankReason } from "../domain/Protocol.js"
import type { EventRecord, EventState, FlowRecord } from "../domain/Records.js"
import { MaxWeight } from "../services/RelayQueue.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import { report } from "./Errors.js"
import * as Format from "./Format.js"
import {
  context,
  decodeEventId,
  eventIdOption,
  flowIdOption,
  idProblem,
  integer,
  invalidValue,
  limit,
  MaxReasonLength,
  parsed,
  print,
  printJson,
  root,
  shared,
  States
} from "./Root.js"
import { demo, run } from "./Run.js"
import * as Store from "./Store.js"

// ---------------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------------

const status = Command.make("status", shared, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const { queue } = yield* Store.openReader(db)
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
  after: flowIdOption("after", "List flows whose id sorts after FLOW (the last one of the previous page).").pipe(Options.optional)
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const { consistent, queue } = yield* Store.openReader(db)
    const [page, stateOf] = yield* consistent(Effect.all([
      queue.flows({ after: Option.getOrUndefined(options.after), limit: options.limit }),
      headStates(queue)
    ]))
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
  flow: flowIdOption("flow", "Only events of this flow.").pipe(Options.optional),
  limit,
  after: eventIdOption("after", "List events whose id sorts after EVENT (the last one of the previous page).").pipe(Options.optional)
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const { queue } = yield* Store.openReader(db)
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

const eventArg = Args.text({ name: "EVENT" }).pipe(Args.withDescription("The event id."), Args.mapEffect((text) => {
  const problem = idProblem(decodeEventId, text)
  return problem === undefined ? Effect.succeed(text) : Effect.fail(HelpDoc.p(`EVENT: ${problem}`))
}))

const show = Command.make("show", { ...shared, event: eventArg }, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const { queue } = yield* Store.openReader(db)
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
  generation: integer("generation", "N", "The generation you inspected (fair-relay show EVENT); refused if the event has moved on.", 0),
  reason: Options.text("reason").pipe(
    Options.withPseudoName("TEXT"),
    Options.withDescription("Why the event may go again; recorded in the audit row."),
    Options.mapEffect((text) =>
      text.length <= MaxReasonLength ? Effect.succeed(text) : Effect.fail(invalidValue("--reason", `at most ${MaxReasonLength} characters (got ${text.length})`))
    )
  ),
  by: Options.text("by").pipe(
    Options.withPseudoName("WHO"),
    Options.withDescription("Who decides; recorded in the audit row (default: the OS user name)."),
    Options.mapEffect((text) =>
      text.trim().length > 0 && text.length <= MaxIdLength
        ? Effect.succeed(text)
        : Effect.fail(invalidValue("--by", `1 to ${MaxIdLength} characters, not blank`))
    ),
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
  event: eventIdOption("event", "Only this event's rows.").pipe(Options.optional),
  limit
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const { queue } = yield* Store.openReader(db)
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
  flow: flowIdOption("flow", "The flow (ordering key)."),
  id: eventIdOption("id", "The event id (idempotency key).").pipe(Options.withPseudoName("ID")),
  body: Options.text("body").pipe(
    Options.withPseudoName("JSON"),
    Options.withDescription("The event body, a JSON document."),
    Options.mapEffect(parsed("body", parseJson))
  ),
  weight: integer("weight", "W", `Sets the flow's weight (1 to ${MaxWeight}).`, 1, MaxWeight).pipe(Options.optional),
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
