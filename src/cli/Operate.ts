/**
 * Operator actions for an incident: a decision on one quarantined head (`eventDecision`, which
 * `redrive` uses too), and `discard` of a head for good. Each is audited (who and why) and refused, changing nothing, when the store has moved
 * on since the operator looked.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Duration, Effect, Option, ParseResult, Schema } from "effect"
import { MissingReason } from "../domain/Errors.js"
import type { EventId } from "../domain/Ids.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import { isBlankReason } from "../domain/Protocol.js"
import { RedrivePageSize } from "../domain/Operator.js"
import {
  byOption,
  context,
  duration,
  EventIdText,
  flowIdOption,
  groupIdOption,
  integer,
  osUser,
  print,
  printJson,
  reasonOption,
  schemaOption,
  shared
} from "./Common.js"
import * as Format from "./Format.js"
import type { Retention } from "../services/Retention.js"
import { usage } from "./Errors.js"
import * as Store from "./Store.js"

/** The event argument of the commands that act on one event. */
export const eventArg = Args.text({ name: "EVENT" }).pipe(Args.withDescription("The event id."), Args.withSchema(EventIdText))

/** What an operator's decision on one quarantined head asks of the queue. */
interface Decision {
  readonly eventId: EventId
  readonly expectedGeneration: number
  readonly reason: string
  readonly actor: string
}

/**
 * `NAME EVENT --generation N --reason TEXT [--by WHO]`: an operator's audited decision on one
 * quarantined head (`redrive`, `discard`), refused when the head has moved on since it was looked at.
 * `decide` runs it on the queue; `told` is the line that says what it did.
 */
export const eventDecision = <A extends { readonly generation: number }, E>(
  name: string,
  why: string,
  decide: (queue: RelayQueueService, decision: Decision) => Effect.Effect<A, E>,
  told: (decision: Decision, result: A) => string
) =>
  Command.make(name, {
    ...shared,
    event: eventArg,
    generation: integer("generation", "N", "The generation you inspected (fair-relay show EVENT); refused if the event has moved on.", 0),
    reason: reasonOption(why),
    by: byOption
  }, (options) =>
    Effect.scoped(Effect.gen(function*() {
      const { db, json } = yield* context(options)
      // Checked before the store is opened, so a blank reason is reported whatever the path.
      if (isBlankReason(options.reason)) return yield* new MissingReason({ eventId: options.event })
      const decision: Decision = {
        eventId: options.event,
        expectedGeneration: options.generation,
        reason: options.reason,
        actor: Option.getOrElse(options.by, osUser)
      }
      const result = yield* decide(yield* Store.openWriter(db), decision)
      if (json) return yield* printJson({ ...result, eventId: decision.eventId, reason: decision.reason, actor: decision.actor })
      yield* print(told(decision, result))
    })))

/** `discard EVENT --generation N --reason TEXT [--by WHO]`. */
export const discard = eventDecision(
  "discard",
  "Why the event is given up; recorded in the audit row.",
  (queue, decision) => queue.discard(decision),
  ({ actor, eventId, expectedGeneration, reason }, result) =>
    `discarded ${eventId}: generation ${expectedGeneration} → ${result.generation}, never to be delivered; ` +
    `${result.nextHead === null ? "its flow has no further event" : `its flow goes on from ${result.nextHead}`} (by ${actor}: ${reason})`
).pipe(Command.withDescription(
  "Take a quarantined head out of its flow for good (never delivered, kept for the audit), with an audited reason; the flow goes on."
))

/** `pause`/`resume (--flow F | --group G) --reason TEXT [--by WHO]`. */
const pauseCommand = (name: "pause" | "resume") =>
  Command.make(name, {
    ...shared,
    flow: flowIdOption("flow", `The flow to ${name}.`).pipe(Options.optional),
    group: groupIdOption("group", `The group (tenant) to ${name}: every flow of it.`).pipe(Options.optional),
    reason: reasonOption(`Why; recorded in the audit row.`),
    by: byOption
  }, (options) =>
    Effect.scoped(Effect.gen(function*() {
      const { db, json } = yield* context(options)
      const target = Option.isSome(options.flow)
        ? Option.isSome(options.group) ? undefined : { flowId: options.flow.value }
        : Option.isSome(options.group) ? { group: options.group.value } : undefined
      if (target === undefined) return yield* usage("InvalidOption", `${name} needs exactly one of --flow FLOW or --group GROUP`)
      const actor = Option.getOrElse(options.by, osUser)
      const queue = yield* Store.openWriter(db)
      const result = yield* queue[name]({ ...target, reason: options.reason, actor })
      if (json) return yield* printJson({ ...result, reason: options.reason, actor })
      const what = `${result.target.kind} ${result.target.id}`
      yield* print(
        !result.changed
          ? `${what} was already ${name === "pause" ? "paused" : "running"} (recorded, by ${actor}: ${options.reason})`
          : name === "pause"
          ? `paused ${what}: its heads are not claimed until resumed (deliveries in flight finish); it keeps its turn (by ${actor}: ${options.reason})`
          : `resumed ${what}: its heads are claimed again, from the turn it kept (by ${actor}: ${options.reason})`
      )
    }))).pipe(Command.withDescription(
      name === "pause"
        ? "Stop claims of a flow's or a group's heads (say, while its endpoint is down), keeping its place in the rotation; audited."
        : "Let a paused flow or group be claimed again, from the place it kept; audited."
    ))

/** `pause (--flow F | --group G) --reason TEXT`. */
export const pause = pauseCommand("pause")

/** `resume (--flow F | --group G) --reason TEXT`. */
export const resume = pauseCommand("resume")

/** A time as the store's ticks (milliseconds since the epoch): a whole number, or an ISO 8601 date. */
const TimeText: Schema.Schema<number, string> = Schema.transformOrFail(Schema.String, Schema.Number, {
  strict: true,
  decode: (text, _, ast) => {
    const value = /^\d+$/.test(text) ? Number(text) : Date.parse(text)
    return Number.isSafeInteger(value) && value >= 0
      ? Effect.succeed(value)
      : Effect.fail(new ParseResult.Type(ast, text, `expected milliseconds since the epoch or an ISO 8601 date, got ${JSON.stringify(text)}`))
  },
  encode: (value) => Effect.succeed(String(value))
})

const TextFilter = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1000))

/** `redrive-all (filters…) --reason TEXT [--by WHO] [--dry-run] [--page-size N]`. */
export const redriveAll = Command.make("redrive-all", {
  ...shared,
  group: groupIdOption("group", "Only heads of this group's flows.").pipe(Options.optional),
  flow: flowIdOption("flow", "Only the head of this flow.").pipe(Options.optional),
  flowPrefix: schemaOption("flow-prefix", "TEXT", "Only heads of flows whose id starts with TEXT.", TextFilter).pipe(Options.optional),
  reasonContains: schemaOption("reason-contains", "TEXT", "Only heads whose quarantine reason contains TEXT.", TextFilter).pipe(Options.optional),
  before: schemaOption("quarantined-before", "TIME", "Only heads quarantined at or before TIME (ms since the epoch, or an ISO 8601 date).", TimeText)
    .pipe(Options.optional),
  after: schemaOption("quarantined-after", "TIME", "Only heads quarantined at or after TIME.", TimeText).pipe(Options.optional),
  all: Options.boolean("all").pipe(Options.withDescription("Every quarantined head (when no filter is given).")),
  dryRun: Options.boolean("dry-run").pipe(Options.withDescription("List the heads it would redrive; change nothing.")),
  pageSize: integer("page-size", "N", `Heads per transaction (1 to 1000; default ${RedrivePageSize}).`, 1, 1000).pipe(Options.optional),
  reason: reasonOption("Why the heads may go again; recorded in each head's audit row."),
  by: byOption
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const filter = {
      group: Option.getOrUndefined(options.group),
      flowId: Option.getOrUndefined(options.flow),
      flowPrefix: Option.getOrUndefined(options.flowPrefix),
      reasonContains: Option.getOrUndefined(options.reasonContains),
      quarantinedBefore: Option.getOrUndefined(options.before),
      quarantinedAfter: Option.getOrUndefined(options.after),
      all: options.all || undefined
    }
    if (Object.values(filter).every((value) => value === undefined)) {
      return yield* usage(
        "InvalidOption",
        "redrive-all needs a filter (--group, --flow, --flow-prefix, --reason-contains, --quarantined-before, --quarantined-after) or --all"
      )
    }
    if (isBlankReason(options.reason)) return yield* usage("InvalidOption", "--reason must not be blank: it is recorded in each head's audit row")
    const actor = Option.getOrElse(options.by, osUser)
    const queue = yield* (options.dryRun ? Store.openReader(db) : Store.openWriter(db))
    let done = 0
    const result = yield* queue.redriveAll({
      filter,
      reason: options.reason,
      actor,
      dryRun: options.dryRun,
      pageSize: Option.getOrUndefined(options.pageSize),
      // Each page is committed before its line is printed: what a killed run printed is done.
      onPage: (page) =>
        json ? Effect.void : Effect.suspend(() => {
          done += page.length
          return print(`${options.dryRun ? "would redrive" : "redriven"} ${page.length} (${done} so far)`)
        })
    })
    if (json) return yield* printJson({ ...result, reason: options.reason, actor })
    if (result.heads.length === 0) return yield* print("no quarantined head matches")
    yield* print(Format.table(
      ["EVENT", "FLOW", "GROUP", "GEN", "REASON"],
      result.heads.map((head) => [head.eventId, head.flowId, head.group, head.generation, head.reason])
    ))
    yield* print(
      options.dryRun
        ? `${result.heads.length} head${result.heads.length === 1 ? "" : "s"} would be redriven (dry run: nothing changed)`
        : `${result.heads.length} head${result.heads.length === 1 ? "" : "s"} redriven in ${result.pages} transaction${result.pages === 1 ? "" : "s"}` +
          `${result.skipped === 0 ? "" : `; ${result.skipped} had moved on and were left alone`} (by ${actor}: ${options.reason})`
    )
  }))).pipe(Command.withDescription(
    "Redrive every quarantined head matching the filters, with one audited reason, a page of heads per transaction; --dry-run lists them. Run it again after a crash: it redrives the rest."
  ))

/** `policy [--lease D] [--retry-budget N] [--backoff-base D] [--backoff-cap D] --reason TEXT`: shows, or changes, the store's policy. */
export const policy = Command.make("policy", {
  ...shared,
  lease: duration("lease", "How long a claim holds a head").pipe(Options.optional),
  retryBudget: integer("retry-budget", "N", "Tries per round before a failing head is quarantined.", 1).pipe(Options.optional),
  backoffBase: duration("backoff-base", "The first retry delay, doubled on each failure of a round").pipe(Options.optional),
  backoffCap: duration("backoff-cap", "The longest retry delay").pipe(Options.optional),
  retainAcked: duration("retain-acked", "How long an acked event is kept before prune deletes it").pipe(Options.optional),
  retainDedup: duration("retain-dedup", "How long a pruned event's dedup record is kept").pipe(Options.optional),
  reason: reasonOption("Why the policy changes; recorded in the audit row.").pipe(Options.optional),
  by: byOption
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const millis = (value: Option.Option<Duration.Duration>) => Option.getOrUndefined(Option.map(value, Duration.toMillis))
    const change = {
      leaseTicks: millis(options.lease),
      retryBudget: Option.getOrUndefined(options.retryBudget),
      backoffBase: millis(options.backoffBase),
      backoffCap: millis(options.backoffCap)
    }
    const windows = { acked: millis(options.retainAcked), dedup: millis(options.retainDedup) }
    const retention = Object.values(windows).every((value) => value === undefined) ? undefined : windows
    const show = (
      p: { readonly leaseTicks: number; readonly retryBudget: number; readonly backoffBase: number; readonly backoffCap: number },
      r: Retention
    ) =>
      Format.fields([
        ["lease", `${p.leaseTicks} ms`],
        ["retry budget", p.retryBudget],
        ["backoff", `${p.backoffBase} ms doubling to ${p.backoffCap} ms`],
        ["retention", Format.retention(r)]
      ])
    if (Object.values(change).every((value) => value === undefined) && retention === undefined) {
      const queue = yield* Store.openReader(db)
      // The store's retention, if an operator set one (the reader's own is the default).
      yield* queue.refreshPolicy
      return yield* json ? printJson({ ...queue.policy, retention: queue.retention }) : print(show(queue.policy, queue.retention))
    }
    const reason = Option.getOrUndefined(options.reason)
    if (reason === undefined || isBlankReason(reason)) return yield* usage("InvalidOption", "a policy change needs --reason TEXT (recorded in the audit row)")
    const actor = Option.getOrElse(options.by, osUser)
    const queue = yield* Store.openWriter(db)
    const result = yield* queue.setPolicy({ policy: change, retention, reason, actor })
    if (json) return yield* printJson({ ...result, reason, actor })
    yield* print(
      result.changed.length === 0
        ? "the store already runs this policy: nothing changed"
        : `policy changed (${result.changed.join(", ")}); running relays take it up within their policy interval (by ${actor}: ${reason})\n${show(result.policy, result.retention)}`
    )
  }))).pipe(Command.withDescription(
    "Show the store's policy, or change it on a live store (lease, retry budget, backoff, retention) with an audited reason; running relays take it up without a restart."
  ))
