/**
 * The dashboard's pages as pure functions of what was read from the store: no I/O here, and every
 * value from the store goes through the escaping `html` tag.
 */
import type { ProtocolKey, RelayPolicy } from "../../domain/Policy.js"
import type { Retention } from "../../services/Retention.js"
import type { AuditRecord, EventRecord, EventState, FlowRecord } from "../../domain/Records.js"
import type { GroupView, QueueStats, RedrivenHead } from "../../services/RelayQueue.js"
import { html, query, raw } from "./Html.js"
import type { Html, Part } from "./Html.js"
import type { Rates } from "./Rates.js"
import { age, redriveCommand } from "../../domain/Display.js"

/** What every page needs to draw its frame. */
export interface Frame {
  readonly base: string
  readonly title: string | undefined
  readonly refreshSeconds: number
  /** "off": read-only dashboard; "anonymous": redrive possible after login; "operator": logged in. */
  readonly access: "off" | "anonymous" | "operator"
  /** The session's CSRF token (operator sessions only), for the forms. */
  readonly csrf: string | undefined
}

/** The pages of the navigation bar. */
export type PageName = "overview" | "flows" | "groups" | "quarantined" | "events" | "audit" | "policy" | "login" | "error"

// Ticks are the Clock's milliseconds in production; small values are logical ticks (seed runs).
const epochMillis = 1e12

/** A tick as a time when it reads as epoch milliseconds, else as a number. */
export const tick = (value: number | null): string =>
  value === null ? "–" : value >= epochMillis ? new Date(value).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : `tick ${value}`


const rate = (value: number | undefined) => (value === undefined ? "…" : value >= 100 ? value.toFixed(0) : value.toFixed(1))

const state = (value: EventState | "drained" | "waiting") => html`<span class="state ${value === "waiting" ? "ready" : value}">${value}</span>`

const href = (frame: Frame, path: string, params: Record<string, string | number | undefined> = {}) =>
  `${frame.base}${path}${query(params)}`

const nav: ReadonlyArray<readonly [PageName, string, string]> = [
  ["overview", "/", "Overview"],
  ["flows", "/flows", "Flows"],
  ["groups", "/groups", "Groups"],
  ["quarantined", "/quarantined", "Quarantined"],
  ["events", "/events", "Events"],
  ["audit", "/audit", "Audit log"],
  ["policy", "/policy", "Policy"]
]

const who = (frame: Frame): Html => {
  switch (frame.access) {
    case "off":
      return html`<span class="who" data-testid="access">read-only</span>`
    case "anonymous":
      return html`<span class="who" data-testid="access">read-only · <a href="${href(frame, "/login")}">log in to redrive</a></span>`
    case "operator":
      return html`<span class="who" data-testid="access">operator · <form method="post" action="${href(frame, "/logout")}"><input type="hidden" name="csrf" value="${frame.csrf}"><button type="submit">log out</button></form></span>`
  }
}

/** The whole document around a page's content. */
export const layout = (frame: Frame, page: PageName, heading: string, content: Part): Html =>
  html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${heading} · fair-relay${frame.title === undefined ? "" : ` · ${frame.title}`}</title>
<link rel="stylesheet" href="${href(frame, "/assets/app.css")}"></head>
<body data-refresh="${frame.refreshSeconds}" data-page="${page}">
<header><span class="brand">fair-relay${frame.title === undefined ? "" : html` <span class="muted">${frame.title}</span>`}</span>
<nav>${nav.map(([name, path, label]) => html`<a href="${href(frame, path)}"${name === page ? raw(" class=\"here\"") : ""}>${label}</a>`)}</nav>
<span class="live"><label><input type="checkbox" id="live-toggle" checked> <span id="live-status">live · every ${frame.refreshSeconds}s</span></label></span>
${who(frame)}</header>
<main><h1>${heading}</h1>${content}</main>
<script src="${href(frame, "/assets/app.js")}"></script>
</body></html>`

/** A refused or failed action, shown inline. */
export const errorBox = (tag: string, message: string): Html =>
  html`<div class="error" role="alert" data-error-tag="${tag}"><strong>${tag}</strong>: ${message}</div>`

// ---------------------------------------------------------------------------------------------
// Overview
// ---------------------------------------------------------------------------------------------

const chart = (rates: Rates): Html => {
  const series = rates.series.slice(-60)
  const width = 720
  const height = 140
  const top = Math.max(1, ...series.map((p) => Math.max(p.claims, p.acks)))
  const slot = width / 60
  const bar = Math.max(1, slot / 2 - 1)
  const y = (v: number) => (v / top) * (height - 20)
  const bars = series.map((p, i) => {
    const x = width - (series.length - i) * slot
    return html`<rect class="claims" x="${x.toFixed(1)}" y="${(height - y(p.claims)).toFixed(1)}" width="${bar.toFixed(1)}" height="${y(p.claims).toFixed(1)}"><title>${rate(p.claims)} claims/min</title></rect><rect class="acks" x="${(x + bar + 1).toFixed(1)}" y="${(height - y(p.acks)).toFixed(1)}" width="${bar.toFixed(1)}" height="${y(p.acks).toFixed(1)}"><title>${rate(p.acks)} acks/min</title></rect>`
  })
  return html`<svg class="chart" role="img" aria-label="claims and acks per minute" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">
<text x="4" y="12">max ${rate(top)}/min · blue claims, green acks · last ${series.length} intervals</text>${bars}</svg>`
}

/** The overview: counts by state, rates, the oldest eligible head, and a small chart. */
export const overview = (frame: Frame, stats: QueueStats, rates: Rates, sampleSeconds: number): Html => {
  const card = (label: string, value: Part, link?: string) =>
    html`<div class="card"><div class="n">${link === undefined ? value : html`<a href="${link}">${value}</a>`}</div><div class="l">${label}</div></div>`
  return layout(frame, "overview", "Overview", html`
<section id="ov-cards" data-live>
<div class="cards">
${card("ready", stats.byState.ready, href(frame, "/events", { state: "ready" }))}
${card("in flight", stats.byState.inflight, href(frame, "/events", { state: "inflight" }))}
${card("acked", stats.byState.acked)}
${card("quarantined", html`<span data-testid="quarantined-count">${stats.byState.quarantined}</span>`, href(frame, "/quarantined"))}
${card("eligible heads", stats.eligibleHeads)}
${card("paused", html`<span data-testid="paused-count">${stats.paused.flows} flows · ${stats.paused.groups} groups</span>`)}
${card("oldest eligible head waited", stats.eligibleHeads === 0 ? "–" : age(stats.oldestEligibleAgeMillis))}
${card("claims / min", rate(rates.claimsPerMinute))}
${card("acks / min", rate(rates.acksPerMinute))}
</div>
<p class="note">Store clock: ${tick(stats.clock.tick)} · ticket ${stats.clock.ticket}.
Claims and acks per minute are measured by this dashboard: it reads the store's counters every ${sampleSeconds}s and divides the change of the claim ticket (every claim takes one, whichever process made it; retries count) and of the number of acked events by the time between readings — over the last minute, or over what it has seen so far (${rates.spanMillis === 0 ? "not enough readings yet" : age(rates.spanMillis)}).</p>
</section>
<h2>Claims and acks per minute, per ${sampleSeconds}s interval</h2>
<section id="ov-chart" data-live>${chart(rates)}</section>`)
}

// ---------------------------------------------------------------------------------------------
// Flows
// ---------------------------------------------------------------------------------------------

/** What a flow's head is doing. */
export type HeadState = "ready" | "waiting" | "inflight" | "quarantined" | "drained"

/** The head-state filter's choices. */
export const HeadStates: ReadonlyArray<HeadState> = ["ready", "waiting", "inflight", "quarantined", "drained"]

/** A flow as the flows page shows it. */
export interface FlowRow {
  readonly flow: FlowRecord
  readonly head: HeadState
}

/** How a flow's head is classified from its record and the in-flight flows. */
export const headState = (flow: FlowRecord, inflight: ReadonlySet<string>, now: number): HeadState =>
  flow.headSeq === null
    ? "drained"
    : flow.eligibleAt === null
    ? "quarantined"
    : inflight.has(flow.flowId)
    ? "inflight"
    : flow.eligibleAt > now
    ? "waiting"
    : "ready"

/** The flows page. */
export const flows = (
  frame: Frame,
  input: {
    readonly rows: ReadonlyArray<FlowRow>
    readonly order: "turn" | "id"
    readonly head: HeadState | undefined
    readonly limit: number
    readonly after: string | undefined
    readonly next: string | undefined
    readonly scanned: number
    readonly now: number
    readonly error: Html | undefined
  }
): Html => {
  const next = (flow: FlowRow) => {
    if (flow.head === "drained" || flow.head === "quarantined" || flow.flow.eligibleAt === null) return "–"
    if (flow.head === "inflight") return `lease ends ${flow.flow.eligibleAt > input.now ? `in ${age(flow.flow.eligibleAt - input.now)}` : "now"}`
    return flow.flow.eligibleAt > input.now ? `in ${age(flow.flow.eligibleAt - input.now)}` : "now"
  }
  const backlog = (flow: FlowRecord) => (flow.headSeq === null ? 0 : flow.seq - flow.headSeq + 1)
  const orderNote = input.order === "turn"
    ? "Flows in turn order: the next claim offers its turn to the first eligible flow of this list (ascending served, then flow id)."
    : "Flows in flow-id order (this store's queue does not list flows in turn order yet); served is each flow's place in the rotation — lowest goes first."
  // With groups a claim picks the group first: the list's order then holds inside each group.
  const groupNote = input.rows.some((row) => row.flow.group !== null)
    ? " With groups, a claim picks a group first (the one with the least served; a flow of no group is a group of its own), then that group's flow with the least served."
    : ""
  return layout(frame, "flows", "Flows", html`
<form class="filters" method="get" action="${href(frame, "/flows")}">
<label>head<select name="head"><option value="">any</option>${HeadStates.map((s) => html`<option${s === input.head ? raw(" selected") : ""}>${s}</option>`)}</select></label>
<label>per page<select name="limit">${[50, 100, 500, 1000].map((n) => html`<option${n === input.limit ? raw(" selected") : ""}>${n}</option>`)}</select></label>
<button type="submit">filter</button>
</form>
<form class="filters" method="get" action="${href(frame, "/events")}"><label>find a flow's events<input name="flow" placeholder="flow id" required></label><button class="secondary" type="submit">show</button></form>
${input.error}
<p class="note">${orderNote}${groupNote} Backlog: events from the head to the last seq, none acked yet. Next eligible: when the head can be claimed (after its backoff, or when an in-flight lease ends).${input.head === undefined ? "" : ` Filtered on head ${input.head}: ${input.scanned} flows scanned for this page.`}</p>
<section id="flows-table" data-live>
<table data-testid="flows"><thead><tr><th>flow</th><th>group</th><th class="num">served</th><th class="num">weight</th><th class="num">head seq</th><th>head</th><th>next eligible</th><th class="num">backlog</th><th class="num">last seq</th></tr></thead><tbody>
${input.rows.length === 0 ? html`<tr><td colspan="9" class="muted">no flows${input.head === undefined ? "" : ` with head ${input.head} here`}</td></tr>` : ""}
${input.rows.map((row) => html`<tr><td class="id"><a href="${href(frame, "/events", { flow: row.flow.flowId })}">${row.flow.flowId}</a></td><td class="id">${row.flow.group ?? "–"}</td><td class="num">${row.flow.served}</td><td class="num">${row.flow.weight}</td><td class="num">${row.flow.headSeq ?? "–"}</td><td>${state(row.head)}${"paused" in row.flow && row.flow.paused === true ? html` <span class="muted" data-testid="paused">paused</span>` : ""}</td><td>${next(row)}</td><td class="num">${backlog(row.flow)}</td><td class="num">${row.flow.seq}</td></tr>`)}
</tbody></table></section>
<div class="pager">${input.after === undefined ? "" : html`<a href="${href(frame, "/flows", { head: input.head, limit: input.limit })}">« first page</a>`}${input.next === undefined ? "" : html`<a data-testid="next-page" href="${href(frame, "/flows", { head: input.head, limit: input.limit, after: input.next })}">next page »</a>`}</div>`)
}

// ---------------------------------------------------------------------------------------------
// Events and quarantined heads
// ---------------------------------------------------------------------------------------------

/** The events page (and the quarantined heads, which are events in state quarantined). */
export const events = (
  frame: Frame,
  input: {
    readonly page: "events" | "quarantined"
    readonly list: ReadonlyArray<EventRecord>
    readonly state: EventState | undefined
    readonly flow: string | undefined
    readonly limit: number
    readonly after: string | undefined
    readonly error: Html | undefined
    /** An action's outcome (a pause or resume of the flow shown). */
    readonly notice?: Html | undefined
  }
): Html => {
  const path = input.page === "quarantined" ? "/quarantined" : "/events"
  const params = { state: input.page === "quarantined" ? undefined : input.state, flow: input.flow, limit: input.limit }
  const last = input.list[input.list.length - 1]
  const filters = input.page === "quarantined"
    ? html`<p class="note">Quarantined heads block their flow until an operator redrives them (open one to see its history${frame.access === "off" ? "" : " and redrive it"}). Attempts: this round; lifetime: since it was enqueued.</p>`
    : html`<form class="filters" method="get" action="${href(frame, "/events")}">
<label>state<select name="state"><option value="">any</option>${(["ready", "inflight", "acked", "quarantined", "discarded"] as const).map((s) => html`<option${s === input.state ? raw(" selected") : ""}>${s}</option>`)}</select></label>
<label>flow<input name="flow" value="${input.flow ?? ""}" placeholder="any"></label>
<button type="submit">filter</button></form><p class="note">${input.flow === undefined ? "Events in event-id order." : "The flow's events in seq order."}</p>`
  return layout(frame, input.page, input.page === "quarantined" ? "Quarantined heads" : input.flow === undefined ? "Events" : `Events of flow ${input.flow}`, html`
${filters}${input.notice}${input.error}
${input.page === "quarantined" ? bulkRedriveEntry(frame, {}) : input.flow === undefined ? "" : pauseForm(frame, { kind: "flow", id: input.flow }, undefined)}
<section id="events-table" data-live>
<table data-testid="events"><thead><tr><th>event</th><th>flow</th><th class="num">seq</th><th>state</th><th class="num">generation</th><th class="num">attempts</th><th class="num">lifetime</th><th>reason</th></tr></thead><tbody>
${input.list.length === 0 ? html`<tr><td colspan="8" class="muted">${input.page === "quarantined" ? "nothing is quarantined" : "no events"}</td></tr>` : ""}
${input.list.map((e) => html`<tr><td class="id"><a href="${href(frame, "/event", { id: e.eventId })}">${e.eventId}</a></td><td class="id"><a href="${href(frame, "/events", { flow: e.flowId })}">${e.flowId}</a></td><td class="num">${e.seq}</td><td>${state(e.state)}</td><td class="num">${e.generation}</td><td class="num">${e.attempts}</td><td class="num">${e.lifetimeAttempts}</td><td>${e.reason ?? ""}</td></tr>`)}
</tbody></table></section>
<div class="pager">${input.after === undefined ? "" : html`<a href="${href(frame, path, params)}">« first page</a>`}${last === undefined || input.list.length < input.limit ? "" : html`<a data-testid="next-page" href="${href(frame, path, { ...params, after: input.flow === undefined ? last.eventId : last.seq })}">next page »</a>`}</div>`)
}

// ---------------------------------------------------------------------------------------------
// Pause and resume, groups
// ---------------------------------------------------------------------------------------------

/** A flow or a group an operator pauses or resumes. */
export interface PauseTarget {
  readonly kind: "flow" | "group"
  /** The flow's or group's id; undefined: the operator types it (the groups page). */
  readonly id: string | undefined
}

/** What an action form shows again after a refusal. */
export interface ActionForm {
  readonly reason: string
  readonly actor: string
}

const loginToAct = (frame: Frame, what: string, next: string): Html =>
  frame.access === "anonymous"
    ? html`<p class="note"><a href="${href(frame, "/login", { next })}">Log in</a> to ${what} from here.</p>`
    : html``

/**
 * The pause/resume form of a flow or a group (operators only): each action needs a reason and
 * who decides, both recorded in the audit row. `paused` known: only the button that applies.
 */
export const pauseForm = (frame: Frame, target: PauseTarget, paused: boolean | undefined, form?: ActionForm): Html => {
  const next = target.kind === "flow" ? `/events${query({ flow: target.id })}` : "/groups"
  if (frame.access !== "operator") return loginToAct(frame, `pause or resume this ${target.kind}`, next)
  return html`<div class="redrive"><h2>Pause or resume ${target.kind === "flow" ? html`flow <span class="id">${target.id}</span>` : "a group"}</h2>
<p class="note">A paused ${target.kind === "flow" ? "flow's head is" : "group's flows' heads are"} not claimed (a delivery in flight finishes and settles); it keeps its place in the rotation and goes on from it when resumed. Recorded in the audit log with your reason and name.</p>
<form method="post" action="${href(frame, "/pause")}" data-testid="pause-form-${target.kind}">
<input type="hidden" name="csrf" value="${frame.csrf}"><input type="hidden" name="kind" value="${target.kind}">
${target.id === undefined ? html`<label>group<input name="id" required maxlength="200" list="group-ids"></label>` : html`<input type="hidden" name="id" value="${target.id}">`}
<label>reason<textarea name="reason" required maxlength="10000">${form?.reason ?? ""}</textarea></label>
<label>who<input name="actor" value="${form?.actor ?? ""}" required maxlength="200"></label>
<div>${paused === true ? "" : html`<button type="submit" name="action" value="pause" data-testid="pause">pause</button> `}${paused === false ? "" : html`<button type="submit" name="action" value="resume" data-testid="resume">resume</button>`}</div>
</form></div>`
}

/** A refused pause or resume: the typed error and the form again with what was typed. */
export const pauseRefused = (frame: Frame, target: PauseTarget, error: Html, form: ActionForm): Html =>
  layout(frame, target.kind === "flow" ? "events" : "groups", `Pause or resume ${target.kind} ${target.id ?? ""}`, html`${error}${pauseForm(frame, target, undefined, form)}`)

/** The groups page: each group's turn, flows and paused state; the pause/resume and bulk redrive forms. */
export const groups = (
  frame: Frame,
  input: {
    readonly rows: ReadonlyArray<GroupView>
    readonly limit: number
    readonly after: string | undefined
    readonly notice: Html | undefined
    readonly error: Html | undefined
  }
): Html => {
  const last = input.rows[input.rows.length - 1]
  return layout(frame, "groups", "Groups", html`
${input.notice}${input.error}
<p class="note">Groups in id order. A claim picks a group first (the least served), then that group's flow with the least served. Flows: the group's flows; with a head: those holding an event not yet acked.</p>
<section id="groups-table" data-live>
<table data-testid="groups"><thead><tr><th>group</th><th class="num">served</th><th class="num">weight</th><th class="num">flows</th><th class="num">with a head</th><th>state</th></tr></thead><tbody>
${input.rows.length === 0 ? html`<tr><td colspan="6" class="muted">no groups</td></tr>` : ""}
${input.rows.map((g) => html`<tr><td class="id">${g.groupId}</td><td class="num">${g.served}</td><td class="num">${g.weight}</td><td class="num">${g.flows}</td><td class="num">${g.waiting}</td><td>${g.paused ? html`<span class="state quarantined" data-testid="group-paused">paused</span>` : html`<span class="state ready">active</span>`}</td></tr>`)}
</tbody></table></section>
<div class="pager">${input.after === undefined ? "" : html`<a href="${href(frame, "/groups", { limit: input.limit })}">« first page</a>`}${last === undefined || input.rows.length < input.limit ? "" : html`<a data-testid="next-page" href="${href(frame, "/groups", { limit: input.limit, after: last.groupId })}">next page »</a>`}</div>
<datalist id="group-ids">${input.rows.map((g) => html`<option value="${g.groupId}">`)}</datalist>
${pauseForm(frame, { kind: "group", id: undefined }, undefined)}
${bulkRedriveEntry(frame, {})}`)
}

// ---------------------------------------------------------------------------------------------
// Bulk redrive
// ---------------------------------------------------------------------------------------------

/** Which quarantined heads a bulk redrive from the dashboard takes: a group's, or those of flows with an id prefix. */
export interface BulkFilter {
  readonly group?: string | undefined
  readonly flowPrefix?: string | undefined
}

/** The bulk redrive form as typed: the filter, the reason and who decides. */
export interface BulkForm extends BulkFilter, Partial<ActionForm> {}

/** The entry to a bulk redrive: a filter, then a dry-run list to confirm (a GET: nothing is changed by it). */
const bulkRedriveEntry = (frame: Frame, form: BulkForm): Html =>
  frame.access === "off"
    ? html``
    : html`<div class="redrive"><h2>Redrive many quarantined heads</h2>
<p class="note">Name a group or a flow-id prefix; the next page lists the quarantined heads that match before anything is changed.</p>
<form class="filters" method="get" action="${href(frame, "/redrive-all")}" data-testid="bulk-entry">
<label>group<input name="group" value="${form.group ?? ""}" maxlength="200" list="group-ids"></label>
<label>flow id prefix<input name="flowPrefix" value="${form.flowPrefix ?? ""}" maxlength="1000"></label>
<button class="secondary" type="submit">choose heads…</button></form></div>`

const bulkFields = (frame: Frame, form: BulkForm) =>
  html`<input type="hidden" name="csrf" value="${frame.csrf}"><input type="hidden" name="group" value="${form.group ?? ""}"><input type="hidden" name="flowPrefix" value="${form.flowPrefix ?? ""}">`

const describeFilter = (filter: BulkFilter) =>
  [filter.group === undefined ? undefined : `group ${filter.group}`, filter.flowPrefix === undefined ? undefined : `flow ids starting with ${filter.flowPrefix}`]
    .filter((part) => part !== undefined)
    .join(" and ")

const headsTable = (frame: Frame, heads: ReadonlyArray<RedrivenHead>, id: string, shown: number) =>
  html`<table data-testid="${id}"><thead><tr><th>event</th><th>flow</th><th>group</th><th class="num">generation</th><th>reason</th></tr></thead><tbody>
${heads.length === 0 ? html`<tr><td colspan="5" class="muted">no quarantined head matches</td></tr>` : ""}
${heads.slice(0, shown).map((h) => html`<tr><td class="id"><a href="${href(frame, "/event", { id: h.eventId })}">${h.eventId}</a></td><td class="id">${h.flowId}</td><td class="id">${h.group ?? "–"}</td><td class="num">${h.generation}</td><td>${h.reason ?? ""}</td></tr>`)}
</tbody></table>${heads.length > shown ? html`<p class="note">…and ${heads.length - shown} more.</p>` : ""}`

// Rows a bulk page lists at most (the count is always whole).
const BulkRowsShown = 1000

/**
 * The bulk redrive pages: the filter and reason form; the dry run's list with a confirm button
 * (carrying a digest of the listed heads, so a confirm redrives only if the same heads still
 * match); or what the confirmed redrive did.
 */
export const bulkRedrive = (
  frame: Frame,
  input: {
    readonly form: BulkForm
    readonly error: Html | undefined
    readonly preview?: { readonly heads: ReadonlyArray<RedrivenHead>; readonly digest: string } | undefined
    readonly done?: { readonly heads: ReadonlyArray<RedrivenHead>; readonly skipped: number } | undefined
  }
): Html => {
  const form = input.form
  const what = describeFilter(form)
  if (frame.access !== "operator") {
    return layout(frame, "quarantined", "Redrive many quarantined heads", html`${input.error}${
      loginToAct(frame, "redrive many heads", `/redrive-all${query({ group: form.group, flowPrefix: form.flowPrefix })}`)
    }${frame.access === "off" ? html`<p class="note">This dashboard is read-only.</p>` : ""}`)
  }
  if (input.done !== undefined) {
    return layout(frame, "quarantined", "Redriven", html`
<div class="ok" role="status" data-testid="bulk-redriven">Redriven ${input.done.heads.length} quarantined head${input.done.heads.length === 1 ? "" : "s"} of ${what}${input.done.skipped === 0 ? "" : `; ${input.done.skipped} had moved on and were left alone`}. Each has its row in the audit log.</div>
${headsTable(frame, input.done.heads, "bulk-done", BulkRowsShown)}
<p><a href="${href(frame, "/quarantined")}">quarantined heads</a> · <a href="${href(frame, "/audit")}">audit log</a></p>`)
  }
  const preview = input.preview
  return layout(frame, "quarantined", "Redrive many quarantined heads", html`
${input.error}
<div class="redrive"><form method="post" action="${href(frame, "/redrive-all")}" data-testid="bulk-form">
${preview === undefined ? html`<input type="hidden" name="csrf" value="${frame.csrf}">
<label>group<input name="group" value="${form.group ?? ""}" maxlength="200"></label>
<label>flow id prefix<input name="flowPrefix" value="${form.flowPrefix ?? ""}" maxlength="1000"></label>` : bulkFields(frame, form)}
<label>reason<textarea name="reason" required maxlength="10000">${form.reason ?? ""}</textarea></label>
<label>who<input name="actor" value="${form.actor ?? ""}" required maxlength="200"></label>
${preview === undefined
    ? html`<div><button type="submit" name="step" value="preview" data-testid="bulk-preview">list the heads that would be redriven</button></div>`
    : html`<input type="hidden" name="digest" value="${preview.digest}">
<p class="note" data-testid="bulk-count">${preview.heads.length} quarantined head${preview.heads.length === 1 ? "" : "s"} of ${what} would be released under a new generation, each audited with this reason and name. Nothing has changed yet.</p>
<div>${preview.heads.length === 0 ? "" : html`<button type="submit" name="step" value="confirm" data-testid="bulk-confirm">redrive these ${preview.heads.length}</button> `}<button class="secondary" type="submit" name="step" value="preview">list again</button></div>`}
</form></div>
${preview === undefined ? "" : headsTable(frame, preview.heads, "bulk-preview-list", BulkRowsShown)}`)
}

// ---------------------------------------------------------------------------------------------
// One event
// ---------------------------------------------------------------------------------------------

/** What the redrive form shows again after a refusal. */
export interface RedriveForm {
  readonly expectedGeneration: string
  readonly reason: string
  readonly actor: string
}

const auditTable = (frame: Frame, rows: ReadonlyArray<AuditRecord>, id: string) =>
  html`<table data-testid="${id}"><thead><tr><th>when</th><th>action</th><th>event</th><th>target</th><th class="num">new generation</th><th>who</th><th>reason</th></tr></thead><tbody>
${rows.length === 0 ? html`<tr><td colspan="7" class="muted">no operator action recorded</td></tr>` : ""}
${rows.map((row) => html`<tr><td>${tick(row.tick)}</td><td>${row.action}</td><td class="id">${row.eventId === null ? "–" : html`<a href="${href(frame, "/event", { id: row.eventId })}">${row.eventId}</a>`}</td><td class="id">${row.target ?? "–"}</td><td class="num">${row.generation ?? "–"}</td><td>${row.actor ?? "–"}</td><td>${row.reason}</td></tr>`)}
</tbody></table>`

/** One event: its record, body, audit history, and the redrive form when it may be redriven. */
export const event = (
  frame: Frame,
  input: {
    readonly event: EventRecord
    readonly audit: ReadonlyArray<AuditRecord>
    readonly now: number
    readonly notice: Html | undefined
    readonly form: RedriveForm | undefined
  }
): Html => {
  const e = input.event
  const lease = e.leaseUntil === null
    ? "–"
    : `${tick(e.leaseUntil)}${e.state === "inflight" ? (e.leaseUntil > input.now ? ` (ends in ${age(e.leaseUntil - input.now)})` : " (expired: the next claim may take it again)") : ""}`
  const redrive = e.state !== "quarantined"
    ? ""
    : frame.access === "operator"
    ? html`<div class="redrive"><h2>Redrive</h2>
<p class="note">Releases this head under a new generation; the flow continues from it. Recorded in the audit log with your reason and name. Refused if the event has moved on since you looked (generation).</p>
<form method="post" action="${href(frame, "/redrive")}" data-testid="redrive-form">
<input type="hidden" name="csrf" value="${frame.csrf}"><input type="hidden" name="eventId" value="${e.eventId}">
<label>expected generation<input name="expectedGeneration" value="${input.form?.expectedGeneration ?? String(e.generation)}" inputmode="numeric" required></label>
<label>reason<textarea name="reason" required maxlength="10000">${input.form?.reason ?? ""}</textarea></label>
<label>who<input name="actor" value="${input.form?.actor ?? ""}" required maxlength="200"></label>
<div><button type="submit">redrive ${e.eventId}</button> <button type="submit" name="action" value="discard" data-testid="discard">discard ${e.eventId}</button></div>
<p class="note">Discard takes this head out of its flow for good (never delivered) and the flow goes on from its next event.</p>
</form></div>`
    : html`<div class="redrive"><p class="note">${
      frame.access === "anonymous"
        ? html`<a href="${href(frame, "/login", { next: `/event${query({ id: e.eventId })}` })}">Log in</a> to redrive this head from here, or use`
        : "This dashboard is read-only. Redrive with"
    } <code data-testid="redrive-command">${redriveCommand(e.eventId, e.generation)}</code>.</p></div>`
  return layout(frame, "events", `Event ${e.eventId}`, html`
${input.notice}
<section id="event-fields" data-live>
<dl class="fields" data-testid="event-fields">
<dt>event</dt><dd class="id">${e.eventId}</dd>
<dt>flow</dt><dd class="id"><a href="${href(frame, "/events", { flow: e.flowId })}">${e.flowId}</a> · seq ${e.seq}</dd>
<dt>state</dt><dd>${state(e.state)}</dd>
<dt>${e.state === "ready" || e.state === "inflight" ? "last retry reason" : "reason"}</dt><dd data-testid="reason">${e.reason ?? "–"}</dd>
<dt>generation</dt><dd data-testid="generation">${e.generation}</dd>
<dt>attempts</dt><dd>${e.attempts} this round · ${e.lifetimeAttempts} in total</dd>
<dt>next at</dt><dd>${tick(e.nextAt)}</dd>
<dt>lease until</dt><dd>${lease}</dd>
</dl>
<h2>Body</h2><pre data-testid="body">${JSON.stringify(e.body, null, 2) ?? "null"}</pre>
<h2>Audit history</h2>${auditTable(frame, input.audit, "event-audit")}
</section>
${redrive}`)
}

// ---------------------------------------------------------------------------------------------
// Policy
// ---------------------------------------------------------------------------------------------

/** The policy change form as typed: each setting's text (empty: unchanged), the reason and who decides. */
export interface PolicyForm {
  readonly leaseTicks: string
  readonly retryBudget: string
  readonly backoffBase: string
  readonly backoffCap: string
  readonly retainAcked: string
  readonly retainDedup: string
  readonly reason: string
  readonly actor: string
}

/** How each setting a policy change can touch is named on the page. */
export const policyLabels: Readonly<Record<ProtocolKey | "retention.acked" | "retention.dedup", string>> = {
  leaseTicks: "lease",
  retryBudget: "retry budget",
  backoffBase: "backoff base",
  backoffCap: "backoff cap",
  admission: "admission",
  "retention.acked": "acked events kept",
  "retention.dedup": "dedup records kept"
}

/** A retention window as shown: a span, or kept forever. */
const windowOf = (millis: number | null) => (millis === null ? "forever" : span(millis))

const span = (ticks: number) => `${ticks} ms${ticks >= 1000 ? ` (${age(ticks)})` : ""}`

/**
 * The store's policy as it runs now, and for an operator the form that changes its live settings
 * (lease, retry budget, backoff, retention) with an audited reason; the others are fixed when a
 * store opens.
 */
export const policy = (
  frame: Frame,
  input: {
    readonly policy: RelayPolicy | undefined
    readonly retention: Retention | undefined
    readonly notice: Html | undefined
    readonly error: Html | undefined
    readonly form: PolicyForm | undefined
  }
): Html => {
  const p = input.policy
  const r = input.retention
  const field = (name: "leaseTicks" | "retryBudget" | "backoffBase" | "backoffCap" | "retainAcked" | "retainDedup", hint: string, current: string | undefined) =>
    html`<label>${name === "retainAcked" ? policyLabels["retention.acked"] : name === "retainDedup" ? policyLabels["retention.dedup"] : policyLabels[name]}<input name="${name}" value="${input.form?.[name] ?? ""}" placeholder="${current ?? ""}" maxlength="40"${name === "retryBudget" ? raw(" inputmode=\"numeric\"") : ""}></label><span class="note">${hint}</span>`
  const form = frame.access === "operator"
    ? html`<div class="redrive"><h2>Change the policy</h2>
<p class="note">Fill in only what changes; an empty field keeps its setting. Durations as milliseconds (<code>20000</code>) or with a unit (<code>500ms</code>, <code>20s</code>, <code>2m</code>, <code>1h</code>, <code>30 seconds</code>). Running relays take it up at their next policy refresh; a claim already made keeps its lease and a retry already scheduled keeps its time. Recorded in the audit log with your reason and name.</p>
<form method="post" action="${href(frame, "/policy")}" data-testid="policy-form">
<input type="hidden" name="csrf" value="${frame.csrf}">
${field("leaseTicks", "how long a claim holds a head", p === undefined ? undefined : `${p.leaseTicks}`)}
${field("retryBudget", "tries per round before a failing head is quarantined", p === undefined ? undefined : `${p.retryBudget}`)}
${field("backoffBase", "the first retry delay, doubled on each failure of a round", p === undefined ? undefined : `${p.backoffBase}`)}
${field("backoffCap", "the longest retry delay", p === undefined ? undefined : `${p.backoffCap}`)}
${field("retainAcked", "how long an acked event is kept before a prune deletes it", r === undefined || r.acked === null ? undefined : `${r.acked}`)}
${field("retainDedup", "how long a pruned event's id still dedupes an enqueue", r === undefined || r.dedup === null ? undefined : `${r.dedup}`)}
<label>reason<textarea name="reason" required maxlength="10000">${input.form?.reason ?? ""}</textarea></label>
<label>who<input name="actor" value="${input.form?.actor ?? ""}" required maxlength="200"></label>
<div><button type="submit">change the policy</button></div>
</form></div>`
    : frame.access === "anonymous"
    ? loginToAct(frame, "change the policy", "/policy")
    : html`<p class="note">This dashboard is read-only. Change the policy with <code>fair-relay policy --lease 20s --reason …</code>.</p>`
  return layout(frame, "policy", "Policy", html`
${input.notice}${input.error}
${p === undefined ? "" : html`<section id="policy-fields" data-live>
<dl class="fields" data-testid="policy">
<dt>lease</dt><dd data-testid="policy-leaseTicks">${span(p.leaseTicks)}</dd>
<dt>retry budget</dt><dd data-testid="policy-retryBudget">${p.retryBudget}</dd>
<dt>backoff base</dt><dd data-testid="policy-backoffBase">${span(p.backoffBase)}</dd>
<dt>backoff cap</dt><dd data-testid="policy-backoffCap">${span(p.backoffCap)}</dd>
<dt>jitter</dt><dd data-testid="policy-jitter">${p.jitter}</dd>
<dt>admission</dt><dd data-testid="policy-admission">${p.admission}</dd>
<dt>clock</dt><dd data-testid="policy-clock">${p.clock}</dd>
<dt>largest body</dt><dd data-testid="policy-maxBodyBytes">${p.maxBodyBytes} bytes</dd>
${r === undefined ? "" : html`<dt>acked events kept</dt><dd data-testid="policy-retention-acked">${windowOf(r.acked)}</dd>
<dt>dedup records kept</dt><dd data-testid="policy-retention-dedup">${windowOf(r.dedup)}</dd>`}
</dl>
<p class="note">The store's settings as this dashboard last read them. Lease, retry budget, backoff, admission and retention are the store's own (all but admission change here, on a live store; retention is this process's own until a change here sets the store's); jitter, clock and the body limit are the options this dashboard's process opened the store with (each process has its own).</p>
</section>`}
${form}`)
}

// ---------------------------------------------------------------------------------------------
// Audit log, login, errors
// ---------------------------------------------------------------------------------------------

/** The audit log. */
export const audit = (
  frame: Frame,
  input: { readonly rows: ReadonlyArray<AuditRecord>; readonly event: string | undefined; readonly limit: number; readonly error: Html | undefined }
): Html =>
  layout(frame, "audit", "Audit log", html`
<form class="filters" method="get" action="${href(frame, "/audit")}"><label>event<input name="event" value="${input.event ?? ""}" placeholder="any"></label>
<label>rows<select name="limit">${[100, 1000, 10000].map((n) => html`<option${n === input.limit ? raw(" selected") : ""}>${n}</option>`)}</select></label><button type="submit">filter</button></form>
${input.error}
<p class="note">Every redrive decision, in the order it was made (the first ${input.limit}): when, which event, the generation it released, who and why. Rows are never changed or removed.</p>
<section id="audit-table" data-live>${auditTable(frame, input.rows, "audit")}</section>`)

/** The login form (only when redrive is enabled). */
export const login = (frame: Frame, input: { readonly next: string; readonly refused: boolean }): Html =>
  layout(frame, "login", "Log in", html`
${input.refused ? errorBox("Unauthorized", "that is not the operator token") : ""}
<p class="note">Redrive from this dashboard needs the operator token it was started with. The login lasts 8 hours in this browser (an HttpOnly cookie); the token is not stored in the page.</p>
<form method="post" action="${href(frame, "/login")}" class="filters"><input type="hidden" name="next" value="${input.next}">
<label>operator token<input type="password" name="token" autocomplete="current-password" required></label><button type="submit">log in</button></form>`)

/** A page for a request the dashboard cannot serve. */
export const failure = (frame: Frame, tag: string, message: string): Html =>
  layout(frame, "error", "Cannot show this", errorBox(tag, message))
