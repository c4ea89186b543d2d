/**
 * The `fair-relay` executable (started by `bin/fair-relay.mjs`). Logs go to stderr so that stdout
 * carries only the command's output; the exit code is the command's (0, 1 or 2). SIGINT and
 * SIGTERM interrupt the command: `run` then shuts down gracefully and exits 0.
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Logger } from "effect"
import { main } from "./Commands.js"

main(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  // Help without the block of built-in options on every command (the root description names them).
  Effect.provide(CliConfig.layer({ showBuiltIns: false })),
  // One logfmt line per log event, on stderr.
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))),
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
