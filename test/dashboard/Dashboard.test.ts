/**
 * The dashboard's parts without a browser: escaping, rates, the access rules, head states, and
 * the HTTP surface (bearer redrive, read-only refusals, bad options) over a real server.
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Exit, Layer } from "effect"
import { createServer } from "node:http"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Dashboard from "../../src/dashboard/Dashboard.js"
import * as Auth from "../../src/dashboard/internal/Auth.js"
import { html, raw } from "../../src/dashboard/internal/Html.js"
import * as Pages from "../../src/dashboard/internal/Pages.js"
import * as Rates from "../../src/dashboard/internal/Rates.js"
import type { FlowRecord } from "../../src/domain/Records.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { fill, policy } from "./fixture.js"
import { serve } from "./harness.js"
import type { Served } from "./harness.js"

describe("Html", () => {
  it("escapes every interpolated value and keeps vouched markup", () => {
    const id = `<script>alert("x")</script>' \``
    expect(html`<td title="${id}">${id}</td>${raw("<br>")}`.text).toBe(
      "<td title=\"&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; &#96;\">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; &#96;</td><br>"
    )
    expect(html`${["<a>", 1, null, undefined, false, html`<b>${"&"}</b>`]}`.text).toBe("&lt;a&gt;1<b>&amp;</b>")
  })
})

describe("Rates", () => {
  const sample = (at: number, ticket: number, acked: number) => ({ at, ticket, acked, quarantined: 0 })

  it("has no rate before two readings", () => {
    expect(Rates.rates([sample(0, 5, 5)])).toMatchObject({ claimsPerMinute: undefined, acksPerMinute: undefined, spanMillis: 0 })
  })

  it("derives claims and acks per minute from the ticket and acked deltas over the last minute", () => {
    const samples = [sample(0, 0, 0), sample(30_000, 100, 10), sample(60_000, 160, 40), sample(90_000, 400, 100)]
    const rates = Rates.rates(samples)
    // Over the last minute (30 s → 90 s): 300 claims, 90 acks.
    expect(rates).toMatchObject({ claimsPerMinute: 300, acksPerMinute: 90, spanMillis: 60_000 })
    expect(rates.series.map((p) => p.claims)).toEqual([200, 120, 480])
  })

  it("counts a counter that went down as no progress, not as a negative rate", () => {
    expect(Rates.rates([sample(0, 100, 50), sample(60_000, 10, 5)])).toMatchObject({ claimsPerMinute: 0, acksPerMinute: 0 })
  })
})

describe("Auth", () => {
  const token = "operator-token-0123456789"

  it("opens a session only for the token and requires its CSRF token on a cookie POST", () => {
    const sessions = new Auth.Sessions(token)
    expect(sessions.login("wrong", 0)).toBeUndefined()
    const session = sessions.login(token, 0)!
    const who = sessions.identify(session.id, undefined, 1)
    expect(who._tag).toBe("Session")
    expect(Auth.mayPost(who, session.csrf)).toBe(true)
    expect(Auth.mayPost(who, undefined)).toBe(false)
    expect(Auth.mayPost(who, "guess")).toBe(false)
    expect(Auth.mayPost(sessions.identify("forged", undefined, 1), session.csrf)).toBe(false)
    expect(sessions.identify(session.id, undefined, Auth.SessionMillis + 1)._tag).toBe("Anonymous")
  })

  it("takes a bearer token in place of a session, and nothing else", () => {
    const sessions = new Auth.Sessions(token)
    expect(sessions.identify(undefined, `Bearer ${token}`, 0)._tag).toBe("Bearer")
    expect(sessions.identify(undefined, `Bearer ${token}x`, 0)._tag).toBe("Anonymous")
    expect(sessions.identify(undefined, token, 0)._tag).toBe("Anonymous")
  })

  it("refuses a POST whose Origin is another host (or opaque)", () => {
    expect(Auth.sameOrigin(undefined, "127.0.0.1:8080")).toBe(true)
    expect(Auth.sameOrigin("http://127.0.0.1:8080", "127.0.0.1:8080")).toBe(true)
    expect(Auth.sameOrigin("http://evil.example", "127.0.0.1:8080")).toBe(false)
    expect(Auth.sameOrigin("null", "127.0.0.1:8080")).toBe(false)
  })
})

describe("head states", () => {
  const flow = (fields: Partial<FlowRecord>): FlowRecord =>
    ({ flowId: "F", seq: 3, served: 0, headSeq: 1, eligibleAt: 100, weight: 1, burst: 0, ...fields }) as FlowRecord

  it("tells drained, quarantined, in-flight, waiting and ready heads apart", () => {
    const inflight = new Set(["I"])
    expect(Pages.headState(flow({ headSeq: null, eligibleAt: null }), inflight, 50)).toBe("drained")
    expect(Pages.headState(flow({ eligibleAt: null }), inflight, 50)).toBe("quarantined")
    expect(Pages.headState(flow({ flowId: "I" as FlowRecord["flowId"] }), inflight, 50)).toBe("inflight")
    expect(Pages.headState(flow({}), inflight, 50)).toBe("waiting")
    expect(Pages.headState(flow({}), inflight, 100)).toBe("ready")
  })
})

describe("options", () => {
  it("refuses a short token, a bad base path and a bad refresh before serving", async () => {
    const queue = {} as never
    for (const options of [{ redriveToken: "short" }, { basePath: "ops/" }, { basePath: "/ops/" }, { refreshSeconds: 0 }]) {
      const exit = await Effect.runPromiseExit(Effect.scoped(Dashboard.makeRouter(queue, options)))
      expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain("DashboardConfigError")
    }
  })
})

describe("Dashboard.layer", () => {
  it("mounts the pages under /dashboard of an application's HttpRouter.Default, next to its own routes", async () => {
    const Own = HttpRouter.Default.use((router) => router.get("/health", Effect.succeed(HttpServerResponse.text("ok"))))
    const Queue = Layer.provideMerge(Layer.effectDiscard(fill), SqliteRelayQueue.layer({ filename: ":memory:", policy }))
    const App = HttpRouter.Default.serve().pipe(
      Layer.provide(Dashboard.layer()),
      Layer.provide(Own),
      Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })),
      Layer.provide(Queue)
    )
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const url = yield* Effect.provide(Dashboard.url, yield* Layer.build(App))
      const get = (path: string) => Effect.promise(() => fetch(`${url}${path}`).then(async (r) => [r.status, await r.text()] as const))
      expect(yield* get("/health")).toEqual([200, "ok"])
      const [status, body] = yield* get("/dashboard/quarantined")
      expect(status).toBe(200)
      expect(body).toContain(">D1</a>")
      expect(body).toContain(`href="/dashboard/event?id=D1"`)
    })))
  })
})

describe("over HTTP", () => {
  const token = "operator-token-0123456789"
  let served: Served
  beforeAll(async () => {
    served = await serve({ redriveToken: token, basePath: "/ops" })
  })
  afterAll(async () => {
    await served?.close()
  })

  const post = (form: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(`${served.url}/ops/redrive`, { method: "POST", body: new URLSearchParams(form), headers, redirect: "manual" })

  it("serves the pages under a base path, with the security headers", async () => {
    for (const path of ["/ops", "/ops/", "/ops/flows", "/ops/quarantined", "/ops/events", "/ops/audit", "/ops/event?id=D1", "/ops/login"]) {
      const response = await fetch(`${served.url}${path}`)
      expect(response.status, path).toBe(200)
      expect(response.headers.get("content-security-policy")).toContain("default-src 'none'")
      const body = await response.text()
      expect(body).toContain(`href="/ops/assets/app.css"`)
      expect(body).not.toContain(token)
    }
  })

  it("redrives with a bearer token (no cookie, so no CSRF token needed) and refuses without one", async () => {
    const before = await served.run(Effect.flatMap(RelayQueue, (q) => q.inspect("B1")))
    const form = { eventId: "B1", expectedGeneration: String(before.event.generation), reason: "fixed upstream", actor: "script" }
    expect((await post(form)).status).toBe(403)
    expect((await post(form, { authorization: "Bearer wrong-token-000000" })).status).toBe(403)
    const done = await post(form, { authorization: `Bearer ${token}` })
    expect(done.status).toBe(303)
    expect(done.headers.get("location")).toBe(`/ops/event?id=B1&redriven=${before.event.generation + 1}`)
    const after = await served.run(Effect.flatMap(RelayQueue, (q) => q.inspect("B1")))
    expect(after.event.state).toBe("ready")
    expect(after.audit.map((a) => a.actor)).toEqual(["script"])
  })

  it("answers a refused redrive with the typed error and a status, changing nothing", async () => {
    const before = await served.run(Effect.flatMap(RelayQueue, (q) => q.inspect("D1")))
    const bearer = { authorization: `Bearer ${token}` }
    const base = { eventId: "D1", expectedGeneration: String(before.event.generation), reason: "again", actor: "script" }
    const cases: ReadonlyArray<readonly [Record<string, string>, number, string]> = [
      [{ ...base, expectedGeneration: "" }, 422, "InvalidInput"],
      [{ ...base, expectedGeneration: "0" }, 409, "GenerationMismatch"],
      [{ ...base, reason: " \n " }, 422, "MissingReason"],
      [{ ...base, actor: "  " }, 422, "InvalidInput"],
      [{ ...base, eventId: "A3" }, 409, "NotQuarantined"],
      [{ ...base, eventId: "missing" }, 404, "EventNotFound"]
    ]
    for (const [form, status, tag] of cases) {
      const response = await post(form, bearer)
      expect(response.status, tag).toBe(status)
      expect(await response.text(), tag).toContain(`data-error-tag="${tag}"`)
    }
    expect(await served.run(Effect.flatMap(RelayQueue, (q) => q.inspect("D1")))).toEqual(before)
  })

  it("shows each flow's group in the flows table", async () => {
    await served.run(Effect.flatMap(RelayQueue, (q) => q.enqueue({ eventId: "T1", flowId: "tenant-flow", group: "acme", body: { delta: 1 } })))
    const body = await (await fetch(`${served.url}/ops/flows?limit=1000`)).text()
    expect(body).toContain("<th>flow</th><th>group</th>")
    expect(body).toMatch(/>tenant-flow<\/a><\/td><td class="id">acme<\/td>/)
    expect(body).toMatch(/>account-A<\/a><\/td><td class="id">–<\/td>/)
    expect(body).toContain("a claim picks a group first")
  })
})
