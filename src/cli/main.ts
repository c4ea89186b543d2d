/**
 * The `fair-relay` executable (started by `bin/fair-relay.mjs`). Logs go to stderr so that stdout
 * carries only the command's output; the exit code is the command's (0, 1 or 2). SIGINT and
 * SIGTERM interrupt the command: `run` then shuts down gracefully and exits 0.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Logger } from "effect"
import { main } from "./Commands.js"

main(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true }))),
  NodeRuntime.runMain({
    disableErrorReporting: true,
    disablePrettyLogger: true,
    teardown: (exit, onExit) =>
      onExit(
        Exit.isSuccess(exit)
          ? typeof exit.value === "number" ? exit.value : 0
          : Cause.isInterruptedOnly(exit.cause) ? 0 : 1
      )
  })
)
