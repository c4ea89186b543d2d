import { Command, Options, Args } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Option } from "effect"
const db = Options.text("db").pipe(Options.optional, Options.withDescription("queue file"))
const json = Options.boolean("json").pipe(Options.withDescription("machine output"))
const root = Command.make("fair-relay", { db, json })
const status = Command.make("status", { db, json }, (o) => Effect.gen(function*() {
  const r = yield* root
  yield* Console.log("status", JSON.stringify({ sub: o, root: r }))
}))
const redrive = Command.make("redrive", { db, json, event: Args.text({ name: "EVENT" }), generation: Options.integer("generation"), reason: Options.text("reason"), by: Options.text("by").pipe(Options.optional) }, (o) => Console.log("redrive", JSON.stringify(o)))
const events = Command.make("events", { state: Options.choice("state", ["ready","acked"]).pipe(Options.optional), limit: Options.integer("limit").pipe(Options.withDefault(100)) }, (o) => Console.log("events", JSON.stringify(o)))
const cmd = root.pipe(Command.withSubcommands([status, redrive, events]))
const cli = Command.run(cmd, { name: "fair-relay", version: "0.1.0" })
cli(process.argv).pipe(Effect.tapErrorCause((c) => Console.error("CAUSE", c.toString().slice(0, 200))), Effect.provide(NodeContext.layer), NodeRuntime.runMain({ disableErrorReporting: true }))
