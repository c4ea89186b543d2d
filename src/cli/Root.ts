/**
 * The `fair-relay` command tree and the application: every subcommand is registered here, `--help`
 * is rendered by `Help`, and `main` returns the process exit code.
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import { Cause, Console, Effect, Exit, Predicate } from "effect"
import * as fs from "node:fs"
import { clock, clockReset } from "./Clock.js"
import { storeCommands } from "./Commands.js"
import { parent } from "./Common.js"
import { report } from "./Errors.js"
import * as Help from "./Help.js"
import { prune } from "./Prune.js"
import { discard, pause, policy, redriveAll, resume } from "./Operate.js"
import { demo, run } from "./Run.js"
import { ui } from "./Ui.js"
import { weight } from "./Weight.js"

const { audit, enqueue, events, flows, groups, redrive, show, status } = storeCommands

/** Every subcommand, in the order the help lists them. */
export const entries: ReadonlyArray<Help.Entry> = [
  { name: "status", command: status },
  { name: "flows", command: flows },
  { name: "groups", command: groups },
  { name: "events", command: events },
  { name: "show", command: show },
  { name: "redrive", command: redrive },
  { name: "redrive-all", command: redriveAll },
  { name: "discard", command: discard },
  { name: "pause", command: pause },
  { name: "resume", command: resume },
  { name: "policy", command: policy },
  { name: "audit", command: audit },
  { name: "enqueue", command: enqueue },
  { name: "weight", command: weight },
  { name: "clock", command: clock, children: [{ name: "reset", command: clockReset }] },
  { name: "prune", command: prune },
  { name: "run", command: run },
  { name: "demo", command: demo },
  { name: "ui", command: ui }
]

/** The command tree. */
export const command = parent.pipe(
  Command.withSubcommands([status, flows, groups, events, show, redrive, redriveAll, discard, pause, resume, policy, audit, enqueue, weight, clock, prune, run, demo, ui])
)

/** Said under the root's help. */
const footer = [
  "--db and --json may come before or after the command. Built in: --version, --log-level LEVEL (before the command), --help on every command.",
  "Exit codes: 0 done; 1 the store or the operation refused (one line on stderr); 2 usage; 130/143 run stopped by SIGINT/SIGTERM (after its summary)."
]

const version = (): string => {
  try {
    const manifest: unknown = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8"))
    return Predicate.hasProperty(manifest, "version") && typeof manifest.version === "string" ? manifest.version : "unknown"
  } catch {
    return "unknown"
  }
}

/** Parses `argv` (node, script, args…) and runs the command. */
export const cli = Command.run(command, { name: "fair-relay", version: version() })

// Options of the root whose value is the next argument (so that value is not a command name).
const valued = new Set(["--db", "--log-level"])

/** The help asked for by `args` (the words after node and the script), if `--help`/`-h` is among them. */
export const helpFor = (args: ReadonlyArray<string>, layout: Help.Layout): string | undefined => {
  const end = args.indexOf("--")
  const words = end < 0 ? args : args.slice(0, end)
  if (args.length > 0 && !words.includes("--help") && !words.includes("-h")) return undefined
  const path: Array<Help.Entry> = []
  let choices = entries
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!
    if (valued.has(word)) {
      i++
      continue
    }
    const entry = choices.find((e) => e.name === word)
    if (entry === undefined) continue
    path.push(entry)
    choices = entry.children ?? []
  }
  if (path.length === 0) return Help.root("fair-relay", version(), parent, entries, footer, layout)
  const program = ["fair-relay", ...path.slice(0, -1).map((e) => e.name)].join(" ")
  return Help.command(program, path[path.length - 1]!, layout)
}

/**
 * Runs the CLI and returns the process exit code: 0, 1 (the store or the operation refused), 2
 * (usage). A failure is printed as one line on stderr first. Interruption passes through.
 */
export const main = (argv: ReadonlyArray<string>) => {
  const help = helpFor(argv.slice(2), Help.layout())
  if (help !== undefined) return Effect.as(Console.log(help), 0)
  return cli(argv).pipe(
    Effect.provide(CliConfig.layer({ showBuiltIns: false })),
    Effect.exit,
    Effect.flatMap((exit) => {
      if (Exit.isSuccess(exit)) return Effect.succeed(0)
      if (Cause.isInterruptedOnly(exit.cause)) return Effect.failCause(exit.cause)
      const { exitCode, line } = report(exit.cause)
      return Effect.as(line === undefined ? Effect.void : Console.error(line), exitCode)
    })
  )
}
