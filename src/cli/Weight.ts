/**
 * `fair-relay weight`: sets the weight of a flow or of a group (tenant) — over a round it gets
 * `W` claims for each one of a weight-1 peer in the same rotation. Setting the weight it already
 * has changes nothing; naming a flow or group that does not exist yet creates it without events.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Effect, Option } from "effect"
import { MaxWeight } from "../services/RelayQueue.js"
import { context, flowIdOption, groupIdOption, IntegerText, named, print, printJson, shared } from "./Common.js"
import { usage } from "./Errors.js"
import * as Store from "./Store.js"

const weightArg = Args.text({ name: "W" }).pipe(
  Args.withDescription(`The weight, 1 to ${MaxWeight}.`),
  Args.withSchema(named("W", IntegerText(1, MaxWeight), (actual) => `expected a whole number from 1 to ${MaxWeight}, got ${JSON.stringify(actual)}`))
)

/** `weight (--flow F | --group G) W`. */
export const weight = Command.make("weight", {
  ...shared,
  flow: flowIdOption("flow", "The flow whose weight to set.").pipe(Options.optional),
  group: groupIdOption("group", "The group (tenant) whose weight to set.").pipe(Options.optional),
  weight: weightArg
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const target = Option.isSome(options.flow)
      ? Option.isSome(options.group) ? undefined : { kind: "flow", id: options.flow.value } as const
      : Option.isSome(options.group) ? { kind: "group", id: options.group.value } as const : undefined
    if (target === undefined) return yield* usage("InvalidOption", "weight needs exactly one of --flow FLOW or --group GROUP")
    const queue = yield* Store.openWriter(db)
    yield* target.kind === "flow"
      ? queue.setFlowWeight({ flowId: target.id, weight: options.weight })
      : queue.setGroupWeight({ groupId: target.id, weight: options.weight })
    if (json) return yield* printJson({ [target.kind === "flow" ? "flowId" : "groupId"]: target.id, weight: options.weight })
    yield* print(`${target.kind} ${target.id}: weight ${options.weight}`)
  }))).pipe(Command.withDescription(
    "Set a flow's or a group's (tenant's) weight: W claims in its rotation for each one of a weight-1 peer."
  ))
