/**
 * The operator dashboard: server-rendered pages over the public `RelayQueue` service — overview
 * (counts, rates, the oldest eligible head, a chart), flows, quarantined heads, events, one
 * event with its audit history, groups, the audit log, the store's policy — refreshed in place
 * while open, and the operator's actions when enabled: redrive or discard a head, pause or resume
 * a flow or a group, redrive a group's (or a flow-id prefix's) quarantined heads after a dry-run
 * list, and change the store's lease, retry budget and backoff.
 *
 * Read-only unless given a `redriveToken`: then an operator logs in with the token (an HttpOnly,
 * SameSite=Strict session cookie; or `Authorization: Bearer TOKEN` per request) and every POST
 * made with the cookie carries the session's CSRF token. Every action goes through the
 * `RelayQueue` operation of the same name (`redrive`, `discard`, `pause`, `resume`, `redriveAll`, `setPolicy`)
 * with the operator's reason and name, so it is audited, and its typed refusals
 * (`GenerationMismatch`, `MissingReason`, `NotQuarantined`, `EventNotFound`, `TargetNotFound`,
 * `InvalidInput`) are shown inline and change nothing.
 * Everything is served by the dashboard itself (no CDN); no secret is ever rendered.
 *
 * ```ts
 * // mount under /dashboard of the application's HttpRouter.Default
 * const DashboardLive = Dashboard.layer({ basePath: "/dashboard" })
 * HttpRouter.Default.serve().pipe(Layer.provide(DashboardLive), Layer.provide(QueueLive), Layer.provide(NodeHttpServer.layer(...)))
 * ```
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as UrlParams from "@effect/platform/UrlParams"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Clock, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import type { Scope } from "effect"
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import { InvalidInput } from "../domain/Errors.js"
import type { EventState, FlowRecord } from "../domain/Records.js"
import { RelayQueue } from "../services/RelayQueue.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import * as Assets from "./internal/Assets.js"
import * as Auth from "./internal/Auth.js"
import { html, query } from "./internal/Html.js"
import type { Html } from "./internal/Html.js"
import * as Pages from "./internal/Pages.js"
import * as Rates from "./internal/Rates.js"

/** Options of the dashboard. */
export interface DashboardOptions {
  /** Path the pages live under: "" (the root) or "/ops"-like. Default "/dashboard" (`layer`) or "" (`layerServer`). */
  readonly basePath?: string | undefined
  /**
   * The operator token that enables redrive from the pages. Absent: the dashboard is read-only
   * (no form, every POST refused). At least 12 characters.
   */
  readonly redriveToken?: string | Redacted.Redacted<string> | undefined
  /** Seconds between in-place refreshes of an open page (1 to 3600, default 5). */
  readonly refreshSeconds?: number | undefined
  /** How often the store's counters are read for the rates (default 5 seconds, at least 1 second). */
  readonly sampleInterval?: Duration.DurationInput | undefined
  /** A label shown in the header (e.g. the store's file name); never put a secret here. */
  readonly title?: string | undefined
  /** Mark the session cookie `Secure` (set it when the dashboard is served over HTTPS). */
  readonly secureCookie?: boolean | undefined
  /**
   * The host names the dashboard answers to (the `Host` header, port ignored); a request naming
   * any other gets `421` and nothing of the store, so a page of another site that rebinds its
   * DNS name to this address reads nothing. Default `LoopbackHosts` (and, for `layerServer`,
   * the host it binds). Add the names operators use when it is reached through a proxy or DNS.
   */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
}

/** The names of this machine every dashboard answers to unless told otherwise. */
export const LoopbackHosts: ReadonlyArray<string> = ["localhost", "127.0.0.1", "::1"]

/** The dashboard's options were refused; nothing was served. */
export class DashboardConfigError extends Schema.TaggedError<DashboardConfigError>()("DashboardConfigError", {
  message: Schema.String
}) {}

/** Shortest operator token accepted. */
export const MinTokenLength = 12

interface Config {
  readonly base: "" | BasePath
  readonly token: string | undefined
  readonly refreshSeconds: number
  readonly sampleInterval: Duration.Duration
  readonly title: string | undefined
  readonly secureCookie: boolean
  readonly allowedHosts: ReadonlySet<string>
}

/** A host name, an IPv4 address or an IPv6 address (at least two colons), without port or scheme. */
const isHostName = (value: unknown): boolean => {
  if (typeof value !== "string") return false
  const name = Auth.normalizeHost(value)
  return /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(name) || (/^[0-9a-f:.]+$/.test(name) && (name.match(/:/g) ?? []).length >= 2)
}

/** A path the dashboard may be mounted at: segments of letters, digits, `.`, `_`, `~` and `-`, no trailing slash. */
type BasePath = `/${string}`
const isBasePath = (path: string): path is BasePath => /^(\/[A-Za-z0-9._~-]+)+$/.test(path)

const configure = (options: DashboardOptions, defaultBase: string): Effect.Effect<Config, DashboardConfigError> =>
  Effect.suspend(() => {
    const refuse = (message: string) => Effect.fail(new DashboardConfigError({ message }))
    const base = options.basePath ?? defaultBase
    if (base !== "" && !isBasePath(base)) {
      return refuse(`basePath must be "" or like "/ops" (segments of letters, digits, . _ ~ -; no trailing slash), got ${JSON.stringify(base)}`)
    }
    const token = options.redriveToken === undefined
      ? undefined
      : Redacted.isRedacted(options.redriveToken)
      ? Redacted.value(options.redriveToken)
      : options.redriveToken
    if (token !== undefined && (token.trim().length < MinTokenLength || /\s/.test(token))) {
      return refuse(`the redrive token must be at least ${MinTokenLength} characters without spaces`)
    }
    const refreshSeconds = options.refreshSeconds ?? 5
    if (!Number.isInteger(refreshSeconds) || refreshSeconds < 1 || refreshSeconds > 3600) {
      return refuse(`refreshSeconds must be an integer from 1 to 3600, got ${refreshSeconds}`)
    }
    const sampleInterval = Duration.decodeUnknown(options.sampleInterval ?? "5 seconds")
    if (Option.isNone(sampleInterval) || !Duration.isFinite(sampleInterval.value) || Duration.toMillis(sampleInterval.value) < 1000) {
      return refuse("sampleInterval must be a finite duration of at least 1 second")
    }
    const hosts = options.allowedHosts ?? LoopbackHosts
    if (!Array.isArray(hosts) || hosts.length === 0 || !hosts.every(isHostName)) {
      return refuse(`allowedHosts must be a non-empty list of host names without port (e.g. "localhost", "ops.example.com", "::1"), got ${JSON.stringify(hosts)}`)
    }
    return Effect.succeed({
      allowedHosts: new Set(hosts.map(Auth.normalizeHost)),
      base,
      token,
      refreshSeconds,
      sampleInterval: sampleInterval.value,
      title: options.title,
      secureCookie: options.secureCookie === true
    })
  })

// ---------------------------------------------------------------------------------------------
// Listing flows
// ---------------------------------------------------------------------------------------------

/** A page of flows, each with the cursor that lists the flows after it. */
interface FlowPage {
  readonly order: "turn" | "id"
  readonly rows: ReadonlyArray<{ readonly flow: FlowRecord; readonly cursor: string }>
}

/**
 * The one place that lists flows: in turn order (ascending served, then flow id: the order the
 * next claims offer turns in), paged by a cursor "served:flowId" of the last row shown.
 */
const flowPage = (queue: RelayQueueService, cursor: string | undefined, limit: number) =>
  Effect.gen(function*() {
    let after: { readonly afterServed: number; readonly after: string } | undefined
    if (cursor !== undefined) {
      const match = /^(-?\d+):(.+)$/s.exec(cursor)
      if (match === null) return yield* new InvalidInput({ operation: "flows", message: "the page cursor is malformed; start from the first page" })
      after = { afterServed: Number(match[1]), after: match[2]! }
    }
    const flows = yield* queue.flows({ order: "turn", limit, ...after })
    return {
      order: "turn",
      rows: flows.map((flow) => ({ flow, cursor: `${flow.served}:${flow.flowId}` }))
    } satisfies FlowPage
  })

/** The flows whose head is in flight (few: one per live claim). */
const inflightFlows = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    const flows = new Set<string>()
    let afterEventId: string | undefined
    // A bound, so a pathological store cannot make one page load read without end.
    for (let pages = 0; pages < 10; pages++) {
      const page = yield* queue.events({ state: "inflight", afterEventId, limit: 10_000 })
      for (const event of page) flows.add(event.flowId)
      if (page.length < 10_000) break
      afterEventId = page[page.length - 1]!.eventId
    }
    return flows
  })

// Flows scanned at most per page load when filtering on the head's state.
const ScanBudget = 20_000

// ---------------------------------------------------------------------------------------------
// Requests and responses
// ---------------------------------------------------------------------------------------------

const securityHeaders = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  // Not "no-referrer": with it browsers send `Origin: null` on the dashboard's own form posts.
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY",
  "cache-control": "no-store"
}

const page = (body: Html, status = 200) =>
  HttpServerResponse.text(body.text, { status, contentType: "text/html; charset=utf-8", headers: securityHeaders })

const asset = (body: string, contentType: string) =>
  HttpServerResponse.text(body, { contentType, headers: { ...securityHeaders, "cache-control": "max-age=300" } })

const searchParams = (request: HttpServerRequest.HttpServerRequest) => new URL(request.url, "http://dashboard.invalid").searchParams

/** A query parameter, or undefined when absent or empty. */
const param = (params: URLSearchParams, name: string): string | undefined => {
  const value = params.get(name)
  return value === null || value === "" ? undefined : value
}

const choice = <A extends string>(value: string | undefined, choices: ReadonlyArray<A>): A | undefined =>
  choices.find((c) => c === value)

const limitParam = (value: string | undefined, choices: ReadonlyArray<number>, fallback: number) =>
  choices.find((n) => String(n) === value) ?? fallback

const States: ReadonlyArray<EventState> = ["ready", "inflight", "acked", "quarantined", "discarded"]

const formField = (params: UrlParams.UrlParams, name: string): string | undefined => Option.getOrUndefined(UrlParams.getFirst(params, name))

/** Reads the store with the error channel drawn as an inline box: InvalidInput is the request's fault, SqlError the store's. */
const reading = <A, E extends { readonly _tag: string; readonly message: string }>(
  effect: Effect.Effect<A, E>
): Effect.Effect<{ readonly value: A; readonly error: undefined } | { readonly value: undefined; readonly error: Html }> =>
  effect.pipe(
    Effect.map((value) => ({ value, error: undefined })),
    Effect.catchAll((error) =>
      error._tag === "InvalidInput"
        ? Effect.succeed({ value: undefined, error: Pages.errorBox(error._tag, error.message) })
        : Effect.as(
          Effect.logError("Dashboard: reading the store failed", error),
          { value: undefined, error: Pages.errorBox(error._tag, "reading the store failed; see the dashboard's log") }
        )
    )
  )

// ---------------------------------------------------------------------------------------------
// The router
// ---------------------------------------------------------------------------------------------

/**
 * The dashboard's routes over `queue`, with its stats sampler running for the scope. Mount the
 * router in any `@effect/platform` HTTP app (`layer` mounts it in `HttpRouter.Default`).
 */
export const makeRouter = (
  queue: RelayQueueService,
  options: DashboardOptions = {}
): Effect.Effect<HttpRouter.HttpRouter, DashboardConfigError, Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* configure(options, "/dashboard")
    const sampler = yield* Rates.start(queue, config.sampleInterval, 720)
    const sessions = config.token === undefined ? undefined : new Auth.Sessions(config.token)
    const attempts = new Auth.Attempts()
    const sampleSeconds = Math.round(Duration.toSeconds(config.sampleInterval))
    const cookiePath = config.base === "" ? "/" : config.base

    const principal = (request: HttpServerRequest.HttpServerRequest, now: number): Auth.Principal =>
      sessions === undefined
        ? { _tag: "Anonymous" }
        : sessions.identify(request.cookies[Auth.CookieName], request.headers["authorization"], now)

    const frameOf = (who: Auth.Principal): Pages.Frame => ({
      base: config.base,
      title: config.title,
      refreshSeconds: config.refreshSeconds,
      access: sessions === undefined ? "off" : who._tag === "Anonymous" ? "anonymous" : "operator",
      csrf: who._tag === "Session" ? who.csrf : undefined
    })

    // Every handler: the request, the wall clock, who is asking.
    const handle = <E, R>(
      f: (context: {
        readonly request: HttpServerRequest.HttpServerRequest
        readonly params: URLSearchParams
        readonly now: number
        readonly who: Auth.Principal
        readonly frame: Pages.Frame
      }) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
    ) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const now = yield* Clock.currentTimeMillis
        const client = clientOf(request)
        const bearer = sessions !== undefined && /^\s*Bearer\s/i.test(request.headers["authorization"] ?? "")
        // A bearer token is a guess at the operator token like a login: limited and logged alike.
        if (bearer && !attempts.allowed(client, now)) return yield* tooManyAttempts(frameOf({ _tag: "Anonymous" }), client, now)
        const who = principal(request, now)
        if (bearer && who._tag !== "Bearer") yield* refusedAttempt("Dashboard: wrong bearer token refused", client, attempts.failed(client, now))
        return yield* f({ request, params: searchParams(request), now, who, frame: frameOf(who) })
      })

    /**
     * Logs a wrong operator token (its attempt already spent, in the same step as the check that
     * allowed it, so parallel guesses cannot all pass the check first) and slows the answer.
     */
    const refusedAttempt = (message: string, client: string, attemptsLeft: number) =>
      Effect.zipRight(
        Effect.logWarning(message).pipe(Effect.annotateLogs({ client, attemptsLeft: Math.floor(attemptsLeft) })),
        Effect.sleep(FailedAttemptDelay)
      )

    const tooManyAttempts = (frame: Pages.Frame, client: string, now: number) => {
      const seconds = Math.max(1, Math.ceil(attempts.retryAfter(client, now) / 1000))
      return Effect.zipRight(
        Effect.logWarning("Dashboard: operator token attempt refused: too many failures").pipe(Effect.annotateLogs({ client })),
        Effect.map(
          page(Pages.failure(frame, "TooManyAttempts", `too many wrong operator tokens from this address; try again in ${seconds} s`), 429),
          HttpServerResponse.setHeader("retry-after", String(seconds))
        )
      )
    }

    const overview = handle(({ frame }) =>
      Effect.gen(function*() {
        const stats = yield* reading(queue.stats)
        if (stats.error !== undefined) return yield* page(Pages.failure(frame, "StoreUnavailable", "reading the store failed; see the dashboard's log"), 500)
        yield* sampler.record(stats.value)
        const rates = Rates.rates(yield* sampler.samples)
        return yield* page(Pages.overview(frame, stats.value, rates, sampleSeconds))
      }))

    const flows = handle(({ frame, now, params }) =>
      Effect.gen(function*() {
        const head = choice(param(params, "head"), Pages.HeadStates)
        const limit = limitParam(param(params, "limit"), [50, 100, 500, 1000], 100)
        const after = param(params, "after")
        const result = yield* reading(Effect.gen(function*() {
          const inflight = yield* inflightFlows(queue)
          const rows: Array<Pages.FlowRow> = []
          let cursor = after
          let scanned = 0
          let next: string | undefined
          let order: FlowPage["order"] = "id"
          for (;;) {
            const batch = head === undefined ? limit : Math.min(1000, ScanBudget - scanned)
            const fetched = yield* flowPage(queue, cursor, batch)
            order = fetched.order
            for (const { cursor: at, flow } of fetched.rows) {
              scanned++
              const row = { flow, head: Pages.headState(flow, inflight, now) }
              if (head === undefined || row.head === head) rows.push(row)
              cursor = at
              if (rows.length === limit) break
            }
            if (rows.length === limit) {
              next = cursor
              break
            }
            if (fetched.rows.length < batch) break
            if (scanned >= ScanBudget) {
              next = cursor
              break
            }
          }
          return { rows, next, scanned, order }
        }))
        return yield* page(
          Pages.flows(frame, {
            rows: result.value?.rows ?? [],
            order: result.value?.order ?? "id",
            head,
            limit,
            after,
            next: result.value?.next,
            scanned: result.value?.scanned ?? 0,
            now,
            error: result.error
          }),
          result.error === undefined ? 200 : 400
        )
      }))

    const eventList = (kind: "events" | "quarantined") =>
      handle(({ frame, params }) =>
        Effect.gen(function*() {
          const state = kind === "quarantined" ? "quarantined" : choice(param(params, "state"), States)
          const flow = kind === "quarantined" ? undefined : param(params, "flow")
          const limit = limitParam(param(params, "limit"), [50, 100, 500, 1000], 100)
          const after = param(params, "after")
          // One flow's events are in seq order and page by seq; all flows' by event id.
          const result = yield* reading(
            flow === undefined
              ? queue.events({ state, afterEventId: after, limit })
              : after !== undefined && !/^\d{1,15}$/.test(after)
              ? Effect.fail(new InvalidInput({ operation: "events", message: "the page cursor of a flow's events is a seq; start from the first page" }))
              : queue.events({ state, flowId: flow, afterSeq: after === undefined ? undefined : Number(after), limit })
          )
          return yield* page(
            Pages.events(frame, { page: kind, list: result.value ?? [], state, flow, limit, after, error: result.error, notice: pauseNotice(params, "flow", flow) }),
            result.error === undefined ? 200 : 400
          )
        }))

    /** The event page, optionally with a notice (a redrive's outcome) and the refused form's values. */
    const eventPage = (
      frame: Pages.Frame,
      now: number,
      eventId: string,
      notice: Html | undefined,
      form: Pages.RedriveForm | undefined,
      status: number
    ) =>
      Effect.gen(function*() {
        const found = yield* Effect.either(queue.inspect(eventId))
        if (found._tag === "Right") {
          const { audit, event } = found.right
          return yield* page(Pages.event(frame, { event, audit, now, notice, form }), status)
        }
        const error = found.left
        if (error._tag === "SqlError") yield* Effect.logError("Dashboard: reading the store failed", error)
        return yield* page(
          Pages.layout(frame, "events", "Event", [
            notice,
            Pages.errorBox(error._tag, error._tag === "SqlError" ? "reading the store failed; see the dashboard's log" : error.message)
          ]),
          error._tag === "EventNotFound" ? 404 : error._tag === "InvalidInput" ? 400 : 500
        )
      })

    const event = handle(({ frame, now, params }) => {
      const id = params.get("id") ?? ""
      const redriven = param(params, "redriven")
      const discarded = param(params, "discarded")
      const notice = redriven !== undefined
        ? html`<div class="ok" role="status" data-testid="redriven">Redriven: now generation ${redriven}, ready to be claimed. The audit log has the decision.</div>`
        : discarded !== undefined
        ? html`<div class="ok" role="status" data-testid="discarded">Discarded: now generation ${discarded}, never to be delivered; the flow goes on from its next event. The audit log has the decision.</div>`
        : undefined
      return eventPage(frame, now, id, notice, undefined, 200)
    })

    const groups = handle(({ frame, params }) =>
      Effect.gen(function*() {
        const limit = limitParam(param(params, "limit"), [50, 100, 500, 1000], 100)
        const after = param(params, "after")
        const result = yield* reading(queue.groups({ after, limit }))
        return yield* page(
          Pages.groups(frame, { rows: result.value ?? [], limit, after, notice: pauseNotice(params, "group", param(params, "group")), error: result.error }),
          result.error === undefined ? 200 : 400
        )
      }))

    const audit = handle(({ frame, params }) =>
      Effect.gen(function*() {
        const eventId = param(params, "event")
        const limit = limitParam(param(params, "limit"), [100, 1000, 10000], 100)
        const result = yield* reading(queue.audit({ eventId, limit }))
        return yield* page(Pages.audit(frame, { rows: result.value ?? [], event: eventId, limit, error: result.error }), result.error === undefined ? 200 : 400)
      }))

    // A POST from another site is refused before its body is read.
    const refusePost = (frame: Pages.Frame, request: HttpServerRequest.HttpServerRequest) =>
      !Auth.sameOrigin(request.headers["origin"], request.headers["host"])
        ? page(Pages.failure(frame, "Forbidden", "a form of another site posted here"), 403)
        : sessions === undefined
        ? page(Pages.failure(frame, "ReadOnly", "this dashboard is read-only: it was started without redrive enabled"), 403)
        : undefined

    const readForm = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.orElseSucceed(request.urlParamsBody, (): UrlParams.UrlParams => [])

    /**
     * The operator's form of an action: refused (403) from another site, on a read-only dashboard,
     * without a login or bearer token, or with a cookie but a missing or stale CSRF token.
     */
    const operatorForm = (frame: Pages.Frame, request: HttpServerRequest.HttpServerRequest, who: Auth.Principal, what: string) =>
      Effect.gen(function*() {
        const refused = refusePost(frame, request)
        if (refused !== undefined) return { refused: yield* refused, form: UrlParams.empty }
        const form = yield* readForm(request)
        if (!Auth.mayPost(who, formField(form, "csrf"))) {
          const message = who._tag === "Anonymous" ? `log in with the operator token to ${what}` : "the form's CSRF token is missing or stale: reload the page"
          return { refused: yield* page(Pages.failure(frame, "Forbidden", message), 403), form }
        }
        return { refused: undefined, form }
      })

    /** The status of an action's typed refusal: the request's fault, a missing target, a conflict, or the store's failure. */
    const refusalStatus = (tag: string) =>
      tag === "SqlError" ? 500 : tag === "InvalidInput" || tag === "MissingReason" ? 422 : tag === "TargetNotFound" ? 404 : 409

    /** A refusal drawn inline (a store failure logged, its details not shown). */
    const refusal = (what: string, error: { readonly _tag: string; readonly message: string }) =>
      Effect.as(
        error._tag === "SqlError" ? Effect.logError(`Dashboard: ${what} failed in the store`, error) : Effect.void,
        Pages.errorBox(error._tag, error._tag === "SqlError" ? "the store failed; nothing was changed (see the dashboard's log)" : error.message)
      )

    const pause = handle(({ frame, request, who }) =>
      Effect.gen(function*() {
        const { form, refused } = yield* operatorForm(frame, request, who, "pause or resume")
        if (refused !== undefined) return refused
        const kind = formField(form, "kind") === "group" ? "group" : "flow"
        const id = formField(form, "id") ?? ""
        const action = formField(form, "action") === "resume" ? "resume" : "pause"
        const values: Pages.ActionForm = { reason: formField(form, "reason") ?? "", actor: (formField(form, "actor") ?? "").trim() }
        const input = { ...(kind === "group" ? { group: id } : { flowId: id }), reason: values.reason, actor: values.actor }
        const result = yield* Effect.either(
          values.actor === ""
            ? Effect.fail(new InvalidInput({ operation: action, message: "say who decides (the audit row records it)" }))
            : action === "pause"
            ? queue.pause(input)
            : queue.resume(input)
        )
        if (result._tag === "Left") {
          const box = yield* refusal(action, result.left)
          return yield* page(Pages.pauseRefused(frame, { kind, id }, box, values), refusalStatus(result.left._tag))
        }
        yield* Effect.logInfo(`Dashboard: ${action}`, { kind, id, changed: result.right.changed, actor: values.actor })
        const done = { done: action, changed: result.right.changed ? "1" : "0" }
        const back = kind === "flow" ? `/events${query({ flow: id, ...done })}` : `/groups${query({ group: id, ...done })}`
        return HttpServerResponse.redirect(`${config.base}${back}`, { status: 303, headers: securityHeaders })
      }))

    /** The quarantined heads a bulk redrive's filter names, listed without a change (a dry run). */
    const bulkPreview = (filter: Pages.BulkFilter, reason: string, actor: string) =>
      Effect.map(queue.redriveAll({ filter, reason, actor, dryRun: true }), ({ heads }) => ({ heads, digest: digestOf(heads) }))

    const bulkFormOf = (params: { readonly get: (name: string) => string | undefined }): Pages.BulkForm => ({
      group: nonEmpty(params.get("group")),
      flowPrefix: nonEmpty(params.get("flowPrefix")),
      reason: params.get("reason") ?? "",
      actor: (params.get("actor") ?? "").trim()
    })

    const bulkPage = handle(({ frame, params }) =>
      page(Pages.bulkRedrive(frame, { form: bulkFormOf({ get: (name) => param(params, name) }), error: undefined })))

    const bulkRedrive = handle(({ frame, request, who }) =>
      Effect.gen(function*() {
        const { form: fields, refused } = yield* operatorForm(frame, request, who, "redrive")
        if (refused !== undefined) return refused
        const form = bulkFormOf({ get: (name) => formField(fields, name) })
        const filter: Pages.BulkFilter = { group: form.group, flowPrefix: form.flowPrefix }
        const reason = form.reason ?? ""
        const actor = form.actor ?? ""
        const refuse = (error: { readonly _tag: string; readonly message: string }) =>
          Effect.flatMap(refusal("redrive-all", error), (box) => page(Pages.bulkRedrive(frame, { form, error: box }), refusalStatus(error._tag)))
        if (filter.group === undefined && filter.flowPrefix === undefined) {
          return yield* refuse(new InvalidInput({ operation: "redriveAll", message: "name a group or a flow id prefix" }))
        }
        if (actor === "") return yield* refuse(new InvalidInput({ operation: "redriveAll", message: "say who decides (the audit rows record it)" }))
        const preview = yield* Effect.either(bulkPreview(filter, reason, actor))
        if (preview._tag === "Left") return yield* refuse(preview.left)
        if (formField(fields, "step") !== "confirm") return yield* page(Pages.bulkRedrive(frame, { form, error: undefined, preview: preview.right }))
        // Confirmed for the heads listed: when others match now, list them again rather than release unseen heads.
        if (formField(fields, "digest") !== preview.right.digest) {
          const box = Pages.errorBox("HeadsChanged", "the quarantined heads that match are not those listed when you looked; check the list again")
          return yield* page(Pages.bulkRedrive(frame, { form, error: box, preview: preview.right }), 409)
        }
        const done = yield* Effect.either(queue.redriveAll({ filter, reason, actor }))
        if (done._tag === "Left") return yield* refuse(done.left)
        yield* Effect.logInfo("Dashboard: redrive-all", { ...filter, heads: done.right.heads.length, skipped: done.right.skipped, actor })
        return yield* page(Pages.bulkRedrive(frame, { form, error: undefined, done: done.right }))
      }))

    const redrive = handle(({ frame, now, request, who }) =>
      Effect.gen(function*() {
        const refused = refusePost(frame, request)
        if (refused !== undefined) return yield* refused
        const form = yield* readForm(request)
        if (!Auth.mayPost(who, formField(form, "csrf"))) {
          return yield* page(
            Pages.failure(frame, "Forbidden", who._tag === "Anonymous" ? "log in with the operator token to redrive" : "the form's CSRF token is missing or stale: reload the page"),
            403
          )
        }
        const eventId = formField(form, "eventId") ?? ""
        const values: Pages.RedriveForm = {
          expectedGeneration: formField(form, "expectedGeneration") ?? "",
          reason: formField(form, "reason") ?? "",
          actor: formField(form, "actor") ?? ""
        }
        const generationText = values.expectedGeneration.trim()
        // The form's second button discards the head instead (an operator's decision, audited alike).
        const action = formField(form, "action") === "discard" ? "discard" : "redrive"
        const decision = {
          eventId,
          // An empty field is no generation (Number("") would read as 0).
          expectedGeneration: /^\d+$/.test(generationText) ? Number(generationText) : Number.NaN,
          reason: values.reason,
          actor: values.actor.trim()
        }
        const result = yield* Effect.either(
          values.actor.trim() === ""
            ? Effect.fail(new InvalidInput({ operation: action, message: "say who decides (the audit row records it)" }))
            : action === "discard"
            ? Effect.map(queue.discard(decision), ({ generation }) => ({ generation }))
            : Effect.map(queue.redrive(decision), ({ generation }) => ({ generation }))
        )
        if (result._tag === "Right") {
          yield* Effect.logInfo(`Dashboard: ${action}`, { eventId, generation: result.right.generation, actor: values.actor.trim() })
          const done = action === "discard" ? { discarded: result.right.generation } : { redriven: result.right.generation }
          return HttpServerResponse.redirect(`${config.base}/event${query({ id: eventId, ...done })}`, {
            status: 303,
            headers: securityHeaders
          })
        }
        const error = result.left
        if (error._tag === "SqlError") yield* Effect.logError("Dashboard: redrive failed in the store", error)
        const message = error._tag === "SqlError" ? "the store failed; nothing was changed (see the dashboard's log)" : error.message
        const status = error._tag === "SqlError" ? 500 : error._tag === "InvalidInput" || error._tag === "MissingReason" ? 422 : 409
        return yield* eventPage(frame, now, eventId, Pages.errorBox(error._tag, message), values, status)
      }))

    /** The policy page: the store's settings read afresh, a notice or refusal, and the form as typed. */
    const policyView = (frame: Pages.Frame, notice: Html | undefined, error: Html | undefined, form: Pages.PolicyForm | undefined, status: number) =>
      Effect.gen(function*() {
        const current = yield* reading(queue.refreshPolicy)
        const view = { policy: current.value, retention: current.value === undefined ? undefined : queue.retention, notice, error: error ?? current.error, form }
        return yield* page(Pages.policy(frame, view), current.error === undefined ? status : 500)
      })

    const policyPage = handle(({ frame, params }) => policyView(frame, policyNotice(params), undefined, undefined, 200))

    const setPolicy = handle(({ frame, request, who }) =>
      Effect.gen(function*() {
        const { form: fields, refused } = yield* operatorForm(frame, request, who, "change the policy")
        if (refused !== undefined) return refused
        const form: Pages.PolicyForm = {
          leaseTicks: formField(fields, "leaseTicks") ?? "",
          retryBudget: formField(fields, "retryBudget") ?? "",
          backoffBase: formField(fields, "backoffBase") ?? "",
          backoffCap: formField(fields, "backoffCap") ?? "",
          retainAcked: formField(fields, "retainAcked") ?? "",
          retainDedup: formField(fields, "retainDedup") ?? "",
          reason: formField(fields, "reason") ?? "",
          actor: (formField(fields, "actor") ?? "").trim()
        }
        const result = yield* Effect.either(
          form.actor === ""
            ? Effect.fail(new InvalidInput({ operation: "setPolicy", message: "say who decides (the audit row records it)" }))
            : queue.setPolicy({
              policy: {
                leaseTicks: durationField(form.leaseTicks),
                retryBudget: countField(form.retryBudget),
                backoffBase: durationField(form.backoffBase),
                backoffCap: durationField(form.backoffCap)
              },
              // Retention only when a window is given: an empty field keeps the store's.
              ...(form.retainAcked.trim() === "" && form.retainDedup.trim() === ""
                ? {}
                : { retention: { acked: durationField(form.retainAcked), dedup: durationField(form.retainDedup) } }),
              reason: form.reason,
              actor: form.actor
            })
        )
        if (result._tag === "Left") {
          const box = yield* refusal("policy", result.left)
          return yield* policyView(frame, undefined, box, form, refusalStatus(result.left._tag))
        }
        yield* Effect.logInfo("Dashboard: policy", { changed: result.right.changed, version: result.right.version, actor: form.actor })
        return HttpServerResponse.redirect(`${config.base}/policy${query({ done: "policy", changed: result.right.changed.join(",") })}`, {
          status: 303,
          headers: securityHeaders
        })
      }))

    const loginPage = handle(({ frame, params }) =>
      sessions === undefined
        ? page(Pages.failure(frame, "ReadOnly", "this dashboard is read-only: it was started without redrive enabled"), 404)
        : page(Pages.login(frame, { next: Auth.safeNext(param(params, "next")), refused: false })))

    const login = handle(({ frame, now, request }) =>
      Effect.gen(function*() {
        const refused = refusePost(frame, request)
        if (refused !== undefined || sessions === undefined) return yield* refused!
        const client = clientOf(request)
        const form = yield* readForm(request)
        if (!attempts.allowed(client, now)) return yield* tooManyAttempts(frame, client, now)
        const next = Auth.safeNext(formField(form, "next"))
        const session = sessions.login(formField(form, "token") ?? "", now)
        if (session === undefined) {
          yield* refusedAttempt("Dashboard: login refused", client, attempts.failed(client, now))
          return yield* page(Pages.login(frame, { next, refused: true }), 401)
        }
        return HttpServerResponse.redirect(`${config.base}${next}`, { status: 303, headers: securityHeaders }).pipe(
          HttpServerResponse.unsafeSetCookie(Auth.CookieName, session.id, {
            httpOnly: true,
            sameSite: "strict",
            path: cookiePath,
            secure: config.secureCookie,
            maxAge: Duration.millis(Auth.SessionMillis)
          })
        )
      }))

    const logout = handle(({ frame, request, who }) =>
      Effect.gen(function*() {
        const refused = refusePost(frame, request)
        if (refused !== undefined || sessions === undefined) return yield* refused!
        const form = yield* readForm(request)
        if (who._tag === "Session" && Auth.mayPost(who, formField(form, "csrf"))) sessions.logout(who.id)
        return HttpServerResponse.redirect(`${config.base}/`, { status: 303, headers: securityHeaders }).pipe(
          HttpServerResponse.expireCookie(Auth.CookieName, { httpOnly: true, sameSite: "strict", path: cookiePath })
        )
      }))

    const routes = HttpRouter.empty.pipe(
      HttpRouter.get("/", overview),
      HttpRouter.get("/flows", flows),
      HttpRouter.get("/events", eventList("events")),
      HttpRouter.get("/quarantined", eventList("quarantined")),
      HttpRouter.get("/event", event),
      HttpRouter.post("/redrive", redrive),
      HttpRouter.get("/groups", groups),
      HttpRouter.post("/pause", pause),
      HttpRouter.get("/redrive-all", bulkPage),
      HttpRouter.post("/redrive-all", bulkRedrive),
      HttpRouter.get("/audit", audit),
      HttpRouter.get("/policy", policyPage),
      HttpRouter.post("/policy", setPolicy),
      HttpRouter.get("/login", loginPage),
      HttpRouter.post("/login", login),
      HttpRouter.post("/logout", logout),
      HttpRouter.get("/assets/app.css", asset(Assets.css, "text/css; charset=utf-8")),
      HttpRouter.get("/assets/app.js", asset(Assets.js, "text/javascript; charset=utf-8")),
      // Browsers ask for it on every page; an empty answer keeps their consoles clean.
      HttpRouter.get("/favicon.ico", HttpServerResponse.empty({ status: 204 }))
    )
    // Every route answers only to the allowed host names (see `DashboardOptions.allowedHosts`).
    const guarded = HttpRouter.use(routes, (app) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const host = Auth.hostName(request.headers["host"])
        return host !== undefined && config.allowedHosts.has(host) ? app : misdirected
      }))
    return config.base === "" ? guarded : HttpRouter.prefixAll(guarded, config.base)
  })

/** The answer to a request naming a host the dashboard does not serve: short, and nothing of the store. */
const misdirected = Effect.sync(() =>
  HttpServerResponse.text(
    "421 Misdirected Request: this dashboard does not answer to that host name (see its allowedHosts / fair-relay ui --allow-host).\n",
    { status: 421, headers: securityHeaders }
  )
)

// How long the answer to a wrong operator token waits: guessing in parallel then costs connections.
const FailedAttemptDelay = Duration.millis(300)

const nonEmpty = (value: string | undefined): string | undefined => (value === undefined || value === "" ? undefined : value)

/** A digest of the heads a dry run listed (id and generation each), so a confirm can tell they are the same. */
const digestOf = (heads: ReadonlyArray<{ readonly eventId: string; readonly generation: number }>): string =>
  createHash("sha256").update(JSON.stringify(heads.map((h) => [h.eventId, h.generation]))).digest("hex")

/** The notice after a pause or resume of the flow or group a page shows. */
const pauseNotice = (params: URLSearchParams, kind: "flow" | "group", id: string | undefined): Html | undefined => {
  const done = params.get("done")
  if (id === undefined || (done !== "pause" && done !== "resume")) return undefined
  const state = done === "pause" ? "paused" : "resumed"
  return params.get("changed") === "0"
    ? html`<div class="ok" role="status" data-testid="pause-notice">The ${kind} ${id} was already ${done === "pause" ? "paused" : "active"}; the decision is in the audit log.</div>`
    : html`<div class="ok" role="status" data-testid="pause-notice">${kind === "flow" ? "Flow" : "Group"} ${id} ${state}. The audit log has the decision.</div>`
}

// The labels by any key a request may name (those it may not have are checked with `Object.hasOwn`).
const policyLabels: Readonly<Record<string, string>> = Pages.policyLabels

/** The notice after a policy change: the settings it changed, or that the store already ran them. */
const policyNotice = (params: URLSearchParams): Html | undefined => {
  if (params.get("done") !== "policy") return undefined
  const changed = (params.get("changed") ?? "").split(",").flatMap((key) => {
    const label = Object.hasOwn(policyLabels, key) ? policyLabels[key] : undefined
    return label === undefined ? [] : [label]
  })
  return changed.length === 0
    ? html`<div class="ok" role="status" data-testid="policy-notice">Nothing changed: the store already runs this policy.</div>`
    : html`<div class="ok" role="status" data-testid="policy-notice">Policy changed: ${changed.join(", ")}. Running relays take it up at their next policy refresh; the audit log has the decision.</div>`
}

const durationUnits: Record<string, string> = { ms: "millis", s: "seconds", m: "minutes", h: "hours" }

/**
 * A duration field as the library takes it: empty is unchanged, digits are milliseconds, the
 * CLI's short forms (`500ms`, `20s`, `2m`, `1h`) are spelled out, anything else is passed on for
 * the library to decode or refuse.
 */
const durationField = (text: string): Duration.DurationInput | undefined => {
  const trimmed = text.trim()
  if (trimmed === "") return undefined
  if (/^\d+$/.test(trimmed)) return Number(trimmed)
  const short = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)$/.exec(trimmed)
  return short === null ? (trimmed as Duration.DurationInput) : `${Number(short[1])} ${durationUnits[short[2]!]!}` as Duration.DurationInput
}

/** A whole-number field: empty is unchanged; anything not a number reaches the library as NaN, which it refuses. */
const countField = (text: string): number | undefined => (text.trim() === "" ? undefined : Number(text.trim()))

/** The client's address, for the per-client limit on token guesses. */
const clientOf = (request: HttpServerRequest.HttpServerRequest): string => Option.getOrElse(request.remoteAddress, () => "unknown")


/** The dashboard's router over the `RelayQueue` in context (see `makeRouter`). */
export const make = (options: DashboardOptions = {}): Effect.Effect<HttpRouter.HttpRouter, DashboardConfigError, RelayQueue | Scope.Scope> =>
  Effect.flatMap(RelayQueue, (queue) => makeRouter(queue, options))

/**
 * Mounts the dashboard in the application's `HttpRouter.Default` (under `basePath`, default
 * "/dashboard"), over the `RelayQueue` in context; serve it with `HttpRouter.Default.serve()`.
 */
export const layer = (options: DashboardOptions = {}): Layer.Layer<never, DashboardConfigError, RelayQueue> =>
  HttpRouter.Default.use((router) => Effect.flatMap(make(options), router.concat))

/** Options of `layerServer`. */
export interface ServerOptions extends DashboardOptions {
  /** TCP port; 0 picks a free one (read it back with `url`). Default 0. */
  readonly port?: number | undefined
  /** Interface to bind. Default "127.0.0.1": showing the store beyond this host is a decision. */
  readonly host?: string | undefined
}

/**
 * A Node HTTP server serving the dashboard alone (at the root unless `basePath` says otherwise)
 * for the scope of the layer; it also provides `HttpServer`, so callers can read the address.
 */
export const layerServer = (
  options: ServerOptions = {}
): Layer.Layer<HttpServer.HttpServer, DashboardConfigError | ServeError, RelayQueue> =>
  Layer.provideMerge(
    Layer.unwrapScoped(
      Effect.map(
        make({ ...options, basePath: options.basePath ?? "", allowedHosts: options.allowedHosts ?? defaultHosts(options.host ?? "127.0.0.1") }),
        (router) => HttpServer.serve(router)
      )
    ),
    NodeHttpServer.layer(() => createServer(), { port: options.port ?? 0, host: options.host ?? "127.0.0.1" })
  )

/** The loopback names, and the bound host when it names one interface (not 0.0.0.0 or ::). */
const defaultHosts = (host: string): ReadonlyArray<string> =>
  host === "0.0.0.0" || host === "::" || !isHostName(host) ? LoopbackHosts : [...new Set([...LoopbackHosts, Auth.normalizeHost(host)])]

/** The base URL of the `HttpServer` in context (`http://host:port`), without a trailing slash. */
export const url: Effect.Effect<string, never, HttpServer.HttpServer> = HttpServer.addressWith((address) =>
  address._tag === "TcpAddress"
    ? Effect.succeed(`http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`)
    : Effect.dieMessage(`Dashboard.url: the server listens on the unix socket ${address.path}, not on TCP`)
)
