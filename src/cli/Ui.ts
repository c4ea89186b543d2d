/**
 * `fair-relay ui`: serves the operator dashboard (`Dashboard`) over a queue store until stopped.
 * Read-only by default — the store is opened read-only and the pages offer no form; with
 * `--allow-redrive` and an operator token the store is opened for writing and a logged-in
 * operator may redrive quarantined heads from the pages. Binds 127.0.0.1 unless told otherwise.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Config, Console, Effect, Layer, Option, Redacted } from "effect"
import * as Dashboard from "../dashboard/Dashboard.js"
import { RelayQueue } from "../services/RelayQueue.js"
import { context, integer, shared } from "./Common.js"
import { failure, usage } from "./Errors.js"
import * as Store from "./Store.js"

/** The environment variable holding the operator token (safer than `--token`, which `ps` shows). */
export const TokenEnv = "FAIR_RELAY_UI_TOKEN"

/** How the store is named in the page header: a path, or a PostgreSQL URL without credentials or parameters. */
const label = (db: string): string => {
  if (!Store.isPostgres(db)) return db
  try {
    const url = new URL(db)
    return `postgres://${url.host}${url.pathname}`
  } catch {
    return "PostgreSQL"
  }
}

/** The `ui` command. */
export const ui = Command.make("ui", {
  ...shared,
  port: integer("port", "N", "TCP port to listen on (default 8080; 0 picks a free one).", 0, 65_535).pipe(Options.withDefault(8080)),
  host: Options.text("host").pipe(
    Options.withPseudoName("HOST"),
    Options.withDescription("Interface to bind (default 127.0.0.1; any other exposes the store's data beyond this host)."),
    Options.withDefault("127.0.0.1")
  ),
  allowHost: Options.text("allow-host").pipe(
    Options.withPseudoName("NAME"),
    Options.withDescription(
      "A host name the dashboard answers to (repeatable; default localhost, 127.0.0.1, ::1 and --host). " +
        "Requests naming any other host get 421: add the names operators use to reach it."
    ),
    Options.atLeast(1),
    Options.optional
  ),
  allowRedrive: Options.boolean("allow-redrive").pipe(
    Options.withDescription(`Let an operator holding the token redrive quarantined heads from the pages (needs --token or $${TokenEnv}).`)
  ),
  token: Options.text("token").pipe(
    Options.withPseudoName("TOKEN"),
    Options.withDescription(`The operator token for --allow-redrive, at least ${Dashboard.MinTokenLength} characters (or set $${TokenEnv}).`),
    Options.optional
  ),
  refresh: integer("refresh", "SECONDS", "Seconds between in-place refreshes of an open page (1 to 3600; default 5).", 1, 3600).pipe(
    Options.withDefault(5)
  )
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db } = yield* context(options)
    if (Option.isSome(options.token) && !options.allowRedrive) {
      return yield* usage("TokenWithoutRedrive", "--token only matters with --allow-redrive; without it the dashboard is read-only")
    }
    const fromEnv = yield* Config.option(Config.nonEmptyString(TokenEnv)).pipe(Effect.orElseSucceed(() => Option.none<string>()))
    const token = options.allowRedrive ? Option.getOrUndefined(Option.orElse(options.token, () => fromEnv)) : undefined
    if (options.allowRedrive && token === undefined) {
      return yield* usage("MissingToken", `--allow-redrive needs an operator token: --token TOKEN or $${TokenEnv}`)
    }
    const queue = yield* (options.allowRedrive ? Store.openWriter(db) : Store.openReader(db))
    const server = Dashboard.layerServer({
      port: options.port,
      host: options.host,
      refreshSeconds: options.refresh,
      allowedHosts: Option.getOrUndefined(options.allowHost),
      title: label(db),
      redriveToken: token === undefined ? undefined : Redacted.make(token)
    }).pipe(Layer.provide(Layer.succeed(RelayQueue, queue)))
    const built = yield* Layer.build(server).pipe(
      Effect.catchTags({
        DashboardConfigError: (error) => Effect.fail(usage("InvalidOption", error.message)),
        ServeError: (error) => Effect.fail(failure("ServeFailed", `cannot listen on ${options.host}:${options.port}: ${String(error.cause)}`))
      })
    )
    const url = yield* Effect.provide(Dashboard.url, built)
    yield* Console.log(
      `fair-relay dashboard at ${url}/ over ${label(db)} — ${token === undefined ? "read-only" : "redrive enabled for holders of the token"}; Ctrl-C stops it`
    )
    return yield* Effect.never
  }))).pipe(
  Command.withDescription("Serve the operator dashboard in the browser (read-only unless --allow-redrive with a token).")
)
