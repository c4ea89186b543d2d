/**
 * What every command of the CLI shares: the root command with its `--db` / `--json` options, the
 * store and output mode a command works with, and option parsers that refuse bad values as usage
 * errors (printed by @effect/cli, exit 2) before any store is opened.
 */
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import { Config, Console, Duration, Effect, Either, Option, ParseResult, Schema } from "effect"
import { EventId, FlowId } from "../domain/Ids.js"
import type { EventState } from "../domain/Records.js"
import { MaxBatchSize } from "../services/RelayQueue.js"
import { usage } from "./Errors.js"
import * as Format from "./Format.js"

/** The environment variable naming the queue store when `--db` is not given. */
export const DbEnv = "FAIR_RELAY_DB"

/** Event states in lifecycle order (table rows, `--state` choices). */
export const States: ReadonlyArray<EventState> = ["ready", "inflight", "acked", "quarantined"]

/** Longest redrive reason the queue stores. */
export const MaxReasonLength = 10_000

// ---------------------------------------------------------------------------------------------
// Shared options
// ---------------------------------------------------------------------------------------------

const db = Options.text("db").pipe(
  Options.withPseudoName("PATH"),
  Options.withDescription(`The queue store (a SQLite file). Defaults to $${DbEnv}.`),
  Options.optional
)

const json = Options.boolean("json").pipe(Options.withDescription("Print one JSON document instead of tables."))

/** `--db PATH` and `--json`, taken by the root and by every store command. */
export const shared = { db, json }

/** The root command: `fair-relay [--db PATH] [--json] <command>`; the options may also follow the command. */
export const root = Command.make("fair-relay", shared).pipe(
  Command.withDescription(
    "Operate a fair-relay queue store: inspect it, redrive quarantined heads, enqueue, run the worker. " +
      "Every command takes --help; --db and --json may come before or after the command; --version; --log-level LEVEL (before the command). " +
      "Exit codes: 0 done, 1 the store or the operation refused (one line on stderr), 2 usage."
  )
)

/** Where a command works and how it prints. */
export interface Context {
  readonly db: string
  readonly json: boolean
}

/** The store and output mode, from the command's options, the root's, then the environment. */
export const context = (options: { readonly db: Option.Option<string>; readonly json: boolean }) =>
  Effect.gen(function*() {
    const top = yield* root
    const fromEnv = yield* Config.option(Config.nonEmptyString(DbEnv)).pipe(Effect.orElseSucceed(() => Option.none<string>()))
    const file = options.db.pipe(Option.orElse(() => top.db), Option.orElse(() => fromEnv))
    if (Option.isNone(file)) {
      return yield* usage("NoStore", `no queue store given: pass --db PATH or set ${DbEnv}`)
    }
    return { db: file.value, json: options.json || top.json } satisfies Context
  })

/** Prints human output on stdout. */
export const print = (text: string) => Console.log(text)

/** Prints the one JSON document of a `--json` command on stdout. */
export const printJson = (value: unknown) => Console.log(Format.json(value))

/** A bad option value as @effect/cli reports it (its message on stderr, exit 2). */
export const invalidValue = (name: string, problem: string) => ValidationError.invalidValue(HelpDoc.p(`${name}: ${problem}`))

/** Parses an option's text; a string result is the problem, refused as a usage error. */
export const parsed = <A>(name: string, parse: (text: string) => A | string) => (text: string) => {
  const result = parse(text)
  return typeof result === "string" ? Effect.fail(invalidValue(`--${name}`, result)) : Effect.succeed(result)
}

const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** `1500` (milliseconds), `500ms`, `30s`, `2m`, `1h`, or Effect's `"30 seconds"`. */
export const parseDuration = (text: string): Duration.Duration | string => {
  const trimmed = text.trim()
  if (/^\d+$/.test(trimmed)) return Duration.millis(Number(trimmed))
  const short = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)$/.exec(trimmed)
  if (short !== null) return Duration.millis(Number(short[1]) * units[short[2]!]!)
  const decoded = Duration.decodeUnknown(trimmed)
  return Option.isSome(decoded) && Duration.isFinite(decoded.value)
    ? decoded.value
    : `${JSON.stringify(text)} is not a duration (e.g. 500ms, 30s, 2m, "30 seconds")`
}

/** A duration option with a default, parsed by `parseDuration`. */
export const duration = (name: string, fallback: string, description: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription(`${description} (default ${fallback}; e.g. 500ms, 30s, 2m, "30 seconds").`),
    Options.withDefault(fallback),
    Options.mapEffect(parsed(name, parseDuration))
  )

/** An integer option within `[min, max]`, refused as a usage error otherwise. */
export const integer = (name: string, pseudo: string, description: string, min: number, max?: number) =>
  Options.integer(name).pipe(
    Options.withPseudoName(pseudo),
    Options.withDescription(description),
    Options.mapEffect((n) =>
      n >= min && (max === undefined || n <= max)
        ? Effect.succeed(n)
        : Effect.fail(invalidValue(`--${name}`, `must be an integer ${max === undefined ? `of at least ${min}` : `from ${min} to ${max}`}, got ${n}`))
    )
  )

/**
 * An id checked as the library checks it (not empty or blank, at most 200 characters, no control
 * characters), so the refusal is one plain sentence and a usage error.
 */
export const idProblem = (decode: (u: unknown) => Either.Either<unknown, ParseResult.ParseError>, text: string): string | undefined =>
  Either.match(decode(text), {
    onLeft: (error) => ParseResult.ArrayFormatter.formatErrorSync(error)[0]?.message ?? "not a valid id",
    onRight: () => undefined
  })

/** Decoders of the library's id schemas. */
export const decodeEventId = Schema.decodeUnknownEither(EventId)
export const decodeFlowId = Schema.decodeUnknownEither(FlowId)

/** Refuses an id option the library would refuse. */
export const checkId = (name: string, decode: (u: unknown) => Either.Either<unknown, ParseResult.ParseError>) => (text: string) => {
  const problem = idProblem(decode, text)
  return problem === undefined ? Effect.succeed(text) : Effect.fail(invalidValue(name, problem))
}

/** An option naming an event. */
export const eventIdOption = (name: string, description: string) =>
  Options.text(name).pipe(Options.withPseudoName("EVENT"), Options.withDescription(description), Options.mapEffect(checkId(`--${name}`, decodeEventId)))

/** An option naming a flow. */
export const flowIdOption = (name: string, description: string) =>
  Options.text(name).pipe(Options.withPseudoName("FLOW"), Options.withDescription(description), Options.mapEffect(checkId(`--${name}`, decodeFlowId)))

/** `--limit N` of the listings. */
export const limit = integer("limit", "N", "At most N rows (1 to 10000, default 100).", 1, MaxBatchSize).pipe(Options.withDefault(100))

