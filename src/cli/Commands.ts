/**
 * The store commands of the operator CLI: inspect a queue store (its flows and their groups),
 * redrive a quarantined head with an audited reason, enqueue. Read commands open the store read-only; every command refuses a
 * path that is not a fair-relay queue store before anything can write to it.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Effect, Option, ParseResult, Schema } from "effect"
import * as fs from "node:fs"
import { redriveCommand, shellCommand } from "../domain/Display.js"
import type { AuditRecord, EventRecord, EventState, FlowRecord } from "../domain/Records.js"
import { MaxWeight } from "../services/RelayQueue.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import {
  context,
  eventIdOption,
  flowIdOption,
  groupIdOption,
  integer,
  limit,
  print,
  printJson,
  printNextPage,
  schemaOption,
  shared,
  States,
  StateText
} from "./Common.js"
import { usage } from "./Errors.js"
import * as Format from "./Format.js"
import { eventArg, eventDecision } from "./Operate.js"
import * as Store from "./Store.js"

// ---------------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------------

const status = Command.make("status", shared, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    // The store's retention, if an operator set one (the reader's own is the default).
    yield* queue.refreshPolicy
    const stats = yield* queue.stats
    if (json) return yield* printJson({ db: Store.masked(db), ...stats, retention: queue.retention })
    const oldest = stats.eligibleHeads === 0 ? "-" : Format.age(stats.oldestEligibleAgeMillis)
    yield* print(
      [
        Format.fields([["queue store", Store.masked(db)], ["tick", Format.tick(stats.clock.tick)], ["ticket", stats.clock.ticket]]),
        "",
        Format.table(["STATE", "EVENTS"], States.map((state) => [state, stats.byState[state]])),
        "",
        Format.fields([
          ["eligible heads", stats.eligibleHeads],
          ["oldest eligible head", oldest],
          ["paused", `${stats.paused.flows} flow${stats.paused.flows === 1 ? "" : "s"}, ${stats.paused.groups} group${stats.paused.groups === 1 ? "" : "s"}`],
          ["policy", `lease ${queue.policy.leaseTicks} ms, retry budget ${queue.policy.retryBudget}, backoff ${queue.policy.backoffBase}–${queue.policy.backoffCap} ms`],
          ["retention", Format.retention(queue.retention)]
        ]),
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
    const inflight = new Set<string>((yield* allInState(queue, "inflight")).map((e) => e.flowId))
    const quarantined = new Set<string>((yield* allInState(queue, "quarantined")).map((e) => e.flowId))
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
  group: groupIdOption("group", "Only the flows of this group.").pipe(Options.optional),
  limit,
  after: flowIdOption("after", "List flows whose id sorts after FLOW (the last one of the previous page).").pipe(Options.optional)
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    // Head states first, then the page: a head that moves in between shows its older state.
    const stateOf = yield* headStates(queue)
    const group = Option.getOrUndefined(options.group)
    const page = yield* queue.flows({ group, after: Option.getOrUndefined(options.after), limit: options.limit })
    const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    const rows = page.map((flow) => ({ ...flow, headState: stateOf(flow) }))
    if (json) return yield* printJson(rows)
    if (rows.length === 0) return yield* print(group === undefined ? "no flows" : `no flows in group ${group}`)
    const headText = (flow: (typeof rows)[number]) =>
      flow.headState === "ready" && flow.eligibleAt !== null && flow.eligibleAt > now
        ? `ready, due in ${Format.age(flow.eligibleAt - now)}`
        : flow.headState
    yield* print(Format.table(
      ["FLOW", "GROUP", "LAST SEQ", "HEAD SEQ", "HEAD STATE", "SERVED", "WEIGHT", "PAUSED"],
      rows.map((flow) => [flow.flowId, flow.group, flow.seq, flow.headSeq, headText(flow), flow.served, flow.weight, flow.paused ? "paused" : ""])
    ))
    yield* printNextPage(rows, options.limit, (last) => shellCommand([...(group === undefined ? [] : ["--group", group]), "--after", last.flowId]))
  }))).pipe(Command.withDescription(
    "Per flow: its group, last seq, head seq and state, served (its place in the rotation), weight; --group lists one group's flows."
  ))

// ---------------------------------------------------------------------------------------------
// groups
// ---------------------------------------------------------------------------------------------

const groups = Command.make("groups", {
  ...shared,
  limit,
  after: groupIdOption("after", "List groups whose id sorts after GROUP (the last one of the previous page).").pipe(Options.optional)
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    const page = yield* queue.groups({ after: Option.getOrUndefined(options.after), limit: options.limit })
    if (json) return yield* printJson(page)
    if (page.length === 0) return yield* print("no groups")
    yield* print(Format.table(
      ["GROUP", "WEIGHT", "SERVED", "FLOWS", "WAITING", "PAUSED"],
      page.map((group) => [group.groupId, group.weight, group.served, group.flows, group.waiting, group.paused ? "paused" : ""])
    ))
    yield* printNextPage(page, options.limit, (last) => shellCommand(["--after", last.groupId]))
  }))).pipe(Command.withDescription(
    "Per group (tenant): weight, served (its place in the rotation across groups), its flows, and how many of them have unacked events."
  ))

// ---------------------------------------------------------------------------------------------
// events
// ---------------------------------------------------------------------------------------------

const events = Command.make("events", {
  ...shared,
  state: schemaOption("state", "STATE", `Only events in this state: ${States.join(", ")}.`, StateText, (actual) =>
    `expected one of ${States.join(", ")}, got ${JSON.stringify(actual)}`).pipe(Options.optional),
  flow: flowIdOption("flow", "Only events of this flow.").pipe(Options.optional),
  limit,
  after: eventIdOption("after", "List events whose id sorts after EVENT (the last one of the previous page; without --flow).").pipe(
    Options.optional
  ),
  afterSeq: integer("after-seq", "N", "With --flow: list the flow's events after seq N (the last one of the previous page).", 0).pipe(
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
      afterSeq: Option.getOrUndefined(options.afterSeq),
      limit: options.limit
    })
    if (json) return yield* printJson(list)
    if (list.length === 0) return yield* print("no events")
    yield* print(Format.table(
      ["EVENT", "FLOW", "SEQ", "STATE", "GEN", "ATTEMPTS", "LIFETIME", "REASON"],
      list.map((e) => [e.eventId, e.flowId, e.seq, e.state, e.generation, e.attempts, e.lifetimeAttempts, e.reason])
    ))
    yield* printNextPage(list, options.limit, (last) =>
      Option.isSome(options.flow)
        ? shellCommand(["--flow", options.flow.value, "--after-seq", last.seq])
        : shellCommand(["--after", last.eventId]))
  }))).pipe(Command.withDescription(
    "Events filtered by state and flow, a page at a time: one flow's in seq order, all flows' in event-id order."
  ))

// ---------------------------------------------------------------------------------------------
// show
// ---------------------------------------------------------------------------------------------


const show = Command.make("show", { ...shared, event: eventArg }, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    const { audit, event } = yield* queue.inspect(options.event)
    if (json) return yield* printJson({ event, audit })
    const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    // A head backing off is `ready` with a later next_at and attempts used; its reason is the
    // receiver's last Retry reason.
    const backingOff = event.state === "ready" && event.attempts > 0 && event.nextAt > now
    const lines = [
      Format.fields([
        ["event", event.eventId],
        ["flow", event.flowId],
        ["seq", event.seq],
        ["state", backingOff ? `ready, backing off after ${event.attempts} failed attempt${event.attempts === 1 ? "" : "s"}; next try in ${Format.age(event.nextAt - now)}` : event.state],
        [event.state === "ready" || event.state === "inflight" ? "last retry reason" : "reason", event.reason],
        ["generation", event.generation],
        ["attempts", `${event.attempts} this round, ${event.lifetimeAttempts} in total`],
        ["next at", Format.tick(event.nextAt)],
        ["lease until", Format.tick(event.leaseUntil)],
        ["body", Format.body(event.body)]
      ]),
      "",
      audit.length === 0
        ? "audit: no operator action recorded"
        : [`audit: ${audit.length} operator action${audit.length === 1 ? "" : "s"}`, auditTable(audit)].join("\n")
    ]
    if (event.state === "quarantined") {
      lines.push("", `release it: ${redriveCommand(event.eventId, event.generation)}`)
    }
    yield* print(lines.join("\n"))
  }))).pipe(Command.withDescription("One event: its record, attempts, the reason it is stuck, and its audit rows."))

const auditTable = (rows: ReadonlyArray<AuditRecord>) =>
  Format.table(
    ["TICK", "ACTION", "EVENT", "TARGET", "GEN", "ACTOR", "REASON"],
    rows.map((row) => [Format.tick(row.tick), row.action, row.eventId, row.target, row.generation, row.actor, row.reason])
  )

// ---------------------------------------------------------------------------------------------
// redrive
// ---------------------------------------------------------------------------------------------

const redrive = eventDecision(
  "redrive",
  "Why the event may go again; recorded in the audit row.",
  (queue, decision) => queue.redrive(decision),
  ({ actor, eventId, expectedGeneration, reason }, result) =>
    `redriven ${eventId}: generation ${expectedGeneration} → ${result.generation}, ready now (by ${actor}: ${reason})`
).pipe(Command.withDescription("Release a quarantined head under a new generation, with an audited reason (the only exit from quarantine)."))

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
    const value: unknown = JSON.parse(text)
    return { value }
  } catch (error) {
    return `not valid JSON (${error instanceof Error ? error.message : String(error)})`
  }
}

/** A JSON document as option text. */
const JsonText: Schema.Schema<{ readonly value: unknown }, string> = Schema.transformOrFail(
  Schema.String,
  Schema.Struct({ value: Schema.Unknown }),
  {
    strict: true,
    decode: (text, _, ast) => {
      const parsed = parseJson(text)
      return typeof parsed === "string" ? ParseResult.fail(new ParseResult.Type(ast, text, parsed)) : ParseResult.succeed(parsed)
    },
    encode: ({ value }) => ParseResult.succeed(JSON.stringify(value))
  }
)

/** Reads a body file, or standard input for `-`, as one JSON document (a usage error otherwise). */
const readBodyFile = (file: string) =>
  Effect.gen(function*() {
    const source = file === "-" ? "standard input" : JSON.stringify(file)
    const text = yield* Effect.try({
      try: () => fs.readFileSync(file === "-" ? 0 : file, "utf8"),
      catch: (cause) => usage("InvalidOption", `--body-file: cannot read ${source}: ${cause instanceof Error ? cause.message : String(cause)}`)
    })
    const parsed = parseJson(text)
    return typeof parsed === "string" ? yield* usage("InvalidOption", `--body-file: ${source} is ${parsed}`) : parsed
  })

const enqueue = Command.make("enqueue", {
  ...shared,
  flow: flowIdOption("flow", "The flow (ordering key)."),
  id: eventIdOption("id", "The event id (idempotency key).").pipe(Options.withPseudoName("ID")),
  body: schemaOption("body", "JSON", "The event body, a JSON document (or use --body-file).", JsonText).pipe(Options.optional),
  bodyFile: Options.text("body-file").pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription("Read the body from FILE, or from standard input with -, for bodies too large for a command line."),
    Options.optional
  ),
  weight: integer("weight", "W", `Sets the flow's weight (1 to ${MaxWeight}).`, 1, MaxWeight).pipe(Options.optional),
  group: groupIdOption(
    "group",
    "The flow's group (a tenant). The flow's first event fixes it; naming another group later is refused (GroupConflict)."
  ).pipe(Options.optional),
  create: Options.boolean("create").pipe(Options.withDescription("Create the store if the file does not exist (SQLite)."))
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    if (Option.isSome(options.body) === Option.isSome(options.bodyFile)) {
      return yield* usage("InvalidOption", "enqueue needs exactly one body: --body JSON or --body-file FILE (- for standard input)")
    }
    const body = Option.isSome(options.body) ? options.body.value : yield* readBodyFile(Option.getOrThrow(options.bodyFile))
    const queue = yield* Store.openWriter(db, { create: options.create })
    const result = yield* queue.enqueue({
      eventId: options.id,
      flowId: options.flow,
      body: body.value,
      weight: Option.getOrUndefined(options.weight),
      group: Option.getOrUndefined(options.group)
    })
    const group = Option.getOrUndefined(options.group)
    if (json) return yield* printJson({ ...result, eventId: options.id, flowId: options.flow, ...(group === undefined ? {} : { group }) })
    const where = `${options.flow}#${result.seq}${group === undefined ? "" : ` (group ${group})`}`
    yield* print(
      result._tag === "Enqueued"
        ? `enqueued ${options.id} as ${where}`
        : `${options.id} was already enqueued as ${where} with this body: nothing changed`
    )
  }))).pipe(Command.withDescription(
    "Store an event at the next seq of its flow (idempotent on the id). A missing SQLite store is created only with --create."
  ))

/** The store commands, in the order the help lists them. */
export const storeCommands = { status, flows, groups, events, show, redrive, audit, enqueue }
