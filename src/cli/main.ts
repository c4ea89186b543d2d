/**
 * The `fair-relay` executable (started by `bin/fair-relay.mjs`). Logs go to stderr so that stdout
 * carries only the command's output; the exit code is the command's (0, 1 or 2). SIGINT and
 * SIGTERM interrupt the command: `run` then shuts down gracefully, prints its summary, and exits
 * 130 (SIGINT) or 143 (SIGTERM).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Logger } from "effect"
import { colorFor, logger, plainConsole } from "./Output.js"
import { main } from "./Root.js"
import * as Signals from "./Signals.js"

Signals.listen()

main(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
  (effect) => Effect.consoleWith((console) => Effect.withConsole(effect, plainConsole(console, colorFor(process.stdout), colorFor(process.stderr)))),
  NodeRuntime.runMain({
    disableErrorReporting: true,
    disablePrettyLogger: true,
    teardown: (exit, onExit) =>
      onExit(
        Exit.isSuccess(exit)
          ? typeof exit.value === "number" ? exit.value : 0
          : Cause.isInterruptedOnly(exit.cause) ? Signals.exitCode() : 1
      )
  })
)
