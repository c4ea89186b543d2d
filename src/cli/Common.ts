/**
 * What every command of the CLI shares: the parent command with its `--db` / `--json` options,
 * the store and output mode a command works with, and options parsed by Schemas
 * (`Options.withSchema`) whose every refusal is one line naming the option — a usage error
 * (printed by @effect/cli, exit 2) before any store is opened.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Config, Console, Duration, Either, Effect, Option, ParseResult, Schema } from "effect"
import * as os from "node:os"
import { EventId, FlowId, GroupId, MaxIdLength } from "../domain/Ids.js"
import type { EventState } from "../domain/Records.js"
import { MaxBatchSize } from "../services/RelayQueue.js"
import { usage } from "./Errors.js"
import * as Format from "./Format.js"

/** The environment variable naming the queue store when `--db` is not given. */
export const DbEnv = "FAIR_RELAY_DB"

/** Event states in lifecycle order (table rows, `--state` choices). */
export const States: ReadonlyArray<EventState> = ["ready", "inflight", "acked", "quarantined", "discarded"]

/** Longest redrive reason the queue stores. */
export const MaxReasonLength = 10_000

// ---------------------------------------------------------------------------------------------
// Options parsed by Schemas
// ---------------------------------------------------------------------------------------------

/** The first plain message of a failed decode (no tree, no schema names). */
const firstMessage = <A>(schema: Schema.Schema<A, string>, actual: unknown): string =>
  Either.match(Schema.decodeUnknownEither(schema)(actual), {
    onLeft: (error) => ParseResult.ArrayFormatter.formatErrorSync(error)[0]?.message ?? "invalid value",
    onRight: () => "invalid value"
  })

/**
 * `schema`, whose failures read `--name: problem` on one line: `explain` words the problem from
 * the text given and the schema's own first message.
 */
export const named = <A>(
  name: string,
  schema: Schema.Schema<A, string>,
  explain: (actual: string, message: string) => string = (_, message) => message
): Schema.Schema<A, string> =>
  schema.annotations({
    message: (issue) => ({ message: `${name}: ${explain(String(issue.actual), firstMessage(schema, issue.actual))}`, override: true })
  })

/** A text option decoded by `schema` (errors name the option). */
export const schemaOption = <A>(
  name: string,
  pseudo: string,
  description: string,
  schema: Schema.Schema<A, string>,
  explain?: (actual: string, message: string) => string
): Options.Options<A> =>
  Options.text(name).pipe(
    Options.withPseudoName(pseudo),
    Options.withDescription(description),
    Options.withSchema(named(`--${name}`, schema, explain))
  )

/** Text of a whole number within `[min, max]`. */
export const IntegerText = (min: number, max: number = Number.MAX_SAFE_INTEGER): Schema.Schema<number, string> =>
  Schema.NumberFromString.pipe(Schema.int(), Schema.between(min, max))

/** An integer option within `[min, max]`. */
export const integer = (name: string, pseudo: string, description: string, min: number, max?: number): Options.Options<number> =>
  schemaOption(name, pseudo, description, IntegerText(min, max), (actual) =>
    `expected a whole number ${max === undefined ? `of at least ${min}` : `from ${min} to ${max}`}, got ${JSON.stringify(actual)}`)

const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** `1500` (milliseconds), `500ms`, `30s`, `2m`, `1h`, or Effect's `"30 seconds"`. */
export const parseDuration = (text: string): Duration.Duration | undefined => {
  const trimmed = text.trim()
  if (/^\d+$/.test(trimmed)) return Duration.millis(Number(trimmed))
  const short = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)$/.exec(trimmed)
  if (short !== null) return Duration.millis(Number(short[1]) * units[short[2]!]!)
  const decoded = Duration.decodeUnknown(trimmed)
  return Option.isSome(decoded) && Duration.isFinite(decoded.value) ? decoded.value : undefined
}

/** Text of a finite duration (see `parseDuration`). */
export const DurationText: Schema.Schema<Duration.Duration, string> = Schema.transformOrFail(Schema.String, Schema.DurationFromSelf, {
  strict: true,
  decode: (text, _, ast) => {
    const duration = parseDuration(text)
    return duration === undefined ? ParseResult.fail(new ParseResult.Type(ast, text, "not a duration")) : ParseResult.succeed(duration)
  },
  encode: (duration) => ParseResult.succeed(`${Duration.toMillis(duration)}ms`)
})

/** A duration option (`500ms`, `30s`, `2m`, `"30 seconds"`). */
export const duration = (name: string, description: string): Options.Options<Duration.Duration> =>
  schemaOption(name, "DURATION", `${description} (e.g. 500ms, 30s, 2m).`, DurationText, (actual) =>
    `${JSON.stringify(actual)} is not a duration (e.g. 500ms, 30s, 2m, "30 seconds")`)


/** An option naming an event, checked as the library checks ids (not blank, at most 200 characters, no control characters). */
export const eventIdOption = (name: string, description: string): Options.Options<EventId> =>
  schemaOption(name, "EVENT", description, EventId)

/** An option naming a flow. */
export const flowIdOption = (name: string, description: string): Options.Options<FlowId> =>
  schemaOption(name, "FLOW", description, FlowId)

/** An option naming a group of flows (a tenant). */
export const groupIdOption = (name: string, description: string): Options.Options<GroupId> =>
  schemaOption(name, "GROUP", description, GroupId)

/** The event id argument, refused with a one-line message naming it. */
export const EventIdText: Schema.Schema<EventId, string> = named("EVENT", EventId)

/** Text of an event state. */
export const StateText: Schema.Schema<EventState, string> = Schema.compose(Schema.String, Schema.Literal(...States), { strict: false })

/** Text an operator writes as a reason (not blank, at most `MaxReasonLength` characters). */
export const ReasonText: Schema.Schema<string, string> = Schema.String.pipe(Schema.maxLength(MaxReasonLength))

/** Who decides (recorded in the audit row). */
export const ActorText: Schema.Schema<string, string> = Schema.String.pipe(
  Schema.filter((text) => text.trim().length > 0, { message: () => "not blank" }),
  Schema.maxLength(MaxIdLength)
)

/** `--reason TEXT` of the audited operations. */
export const reasonOption = (description: string): Options.Options<string> =>
  schemaOption("reason", "TEXT", description, ReasonText, (actual) => `at most ${MaxReasonLength} characters (got ${actual.length})`)

/** `--by WHO` of the audited operations (the OS user when not given). */
export const byOption: Options.Options<Option.Option<string>> = schemaOption(
  "by",
  "WHO",
  "Who decides; recorded in the audit row (default: the OS user name).",
  ActorText,
  () => `1 to ${MaxIdLength} characters, not blank`
).pipe(Options.optional)

/** The OS user, recorded as the actor unless `--by` says otherwise. */
export const osUser = (): string => {
  try {
    return os.userInfo().username
  } catch {
    return process.env.USER ?? process.env.USERNAME ?? "unknown"
  }
}

/** `--limit N` of the listings. */
export const limit = integer("limit", "N", `At most N rows (1 to ${MaxBatchSize}; default 100).`, 1, MaxBatchSize).pipe(
  Options.withDefault(100)
)

// ---------------------------------------------------------------------------------------------
// Shared options and the parent command
// ---------------------------------------------------------------------------------------------

const dbDescription = `The queue store: a SQLite file, or a postgres:// URL (default $${DbEnv}).`

const db = Options.text("db").pipe(Options.withPseudoName("DB"), Options.withDescription(dbDescription), Options.optional)

const json = Options.boolean("json").pipe(Options.withDescription("Print one JSON document instead of tables."))

/** `--db DB` and `--json`, taken by the parent and by every store command. */
export const shared = { db, json }

/**
 * The parent command: `fair-relay [--db DB] [--json] <command>`; the options may also follow the
 * command. Only the parent's `--db` falls back to `$FAIR_RELAY_DB`, so a `--db` given before the
 * command wins over the environment.
 */
export const parent = Command.make("fair-relay", {
  db: Options.text("db").pipe(
    Options.withPseudoName("DB"),
    Options.withDescription(dbDescription),
    Options.withFallbackConfig(Config.nonEmptyString(DbEnv)),
    Options.optional
  ),
  json
}).pipe(
  Command.withDescription(
    "Operate a fair-relay queue store: inspect it, redrive quarantined heads, enqueue, run the worker, repair its clock."
  )
)

/** Where a command works and how it prints. */
export interface Context {
  readonly db: string
  readonly json: boolean
}

/** The store and output mode, from the command's options, then the parent's (which fall back to the environment). */
export const context = (options: { readonly db: Option.Option<string>; readonly json: boolean }) =>
  Effect.gen(function*() {
    const top = yield* parent
    const db = options.db.pipe(Option.orElse(() => top.db))
    if (Option.isNone(db)) return yield* usage("NoStore", `no queue store given: pass --db DB or set ${DbEnv}`)
    return { db: db.value, json: options.json || top.json } satisfies Context
  })

/** Prints human output on stdout, control characters made harmless (`Format.lines`). */
export const print = (text: string) => Console.log(Format.lines(text))

/** After a full page of `limit` rows, the options that list the next one (`next` of the last row). */
export const printNextPage = <A>(page: ReadonlyArray<A>, limit: number, next: (last: A) => string) =>
  page.length === limit && page.length > 0 ? print(`… more: ${next(page[page.length - 1]!)}`) : Effect.void

/** Prints the one JSON document of a `--json` command on stdout. */
export const printJson = (value: unknown) => Console.log(Format.json(value))
