/**
 * Operator actions for an incident, beside the one-head `redrive`: `discard` a quarantined head
 * for good. Each is audited (who and why) and refused, changing nothing, when the store has moved
 * on since the operator looked.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Effect, Option } from "effect"
import { MissingReason } from "../domain/Errors.js"
import { isBlankReason } from "../domain/Protocol.js"
import { byOption, context, EventIdText, flowIdOption, groupIdOption, integer, osUser, print, printJson, reasonOption, shared } from "./Common.js"
import { usage } from "./Errors.js"
import * as Store from "./Store.js"

const eventArg = Args.text({ name: "EVENT" }).pipe(Args.withDescription("The event id."), Args.withSchema(EventIdText))

/** `discard EVENT --generation N --reason TEXT [--by WHO]`. */
export const discard = Command.make("discard", {
  ...shared,
  event: eventArg,
  generation: integer("generation", "N", "The generation you inspected (fair-relay show EVENT); refused if the event has moved on.", 0),
  reason: reasonOption("Why the event is given up; recorded in the audit row."),
  by: byOption
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    // Checked before the store is opened, so a blank reason is reported whatever the path.
    if (isBlankReason(options.reason)) return yield* new MissingReason({ eventId: options.event })
    const actor = Option.getOrElse(options.by, osUser)
    const queue = yield* Store.openWriter(db)
    const result = yield* queue.discard({ eventId: options.event, expectedGeneration: options.generation, reason: options.reason, actor })
    if (json) return yield* printJson({ ...result, eventId: options.event, reason: options.reason, actor })
    yield* print(
      `discarded ${options.event}: generation ${options.generation} → ${result.generation}, never to be delivered; ` +
        `${result.nextHead === null ? "its flow has no further event" : `its flow goes on from ${result.nextHead}`} (by ${actor}: ${options.reason})`
    )
  }))).pipe(Command.withDescription(
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
