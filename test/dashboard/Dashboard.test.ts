/**
 * The dashboard's parts without a browser: escaping, rates, the access rules, head states, and
 * the HTTP surface (bearer redrive, read-only refusals, bad options) over a real server.
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Exit, Layer } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createServer, request as httpRequest } from "node:http"
import * as path from "node:path"
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
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { fill, policy } from "./fixture.js"
import { captureLogs } from "../support/logs.js"
import { testTmpDir } from "../support/tmp.js"
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
  const sample = (at: number, claims: number, acked: number) => ({ at, claims, acked, quarantined: 0 })

  it("has no rate before two readings", () => {
    expect(Rates.rates([sample(0, 5, 5)])).toMatchObject({ claimsPerMinute: undefined, acksPerMinute: undefined, spanMillis: 0 })
  })

  it("derives claims and acks per minute from the claims and acked deltas over the last minute", () => {
    const samples = [sample(0, 0, 0), sample(30_000, 100, 10), sample(60_000, 160, 40), sample(90_000, 400, 100)]
    const rates = Rates.rates(samples)
    // Over the last minute (30 s → 90 s): 300 claims, 90 acks.
    expect(rates).toMatchObject({ claimsPerMinute: 300, acksPerMinute: 90, spanMillis: 60_000 })
    expect(rates.series.map((p) => p.claims)).toEqual([200, 120, 480])
  })

  it("counts a counter that went down as no progress, not as a negative rate", () => {
    expect(Rates.rates([sample(0, 100, 50), sample(60_000, 10, 5)])).toMatchObject({ claimsPerMinute: 0, acksPerMinute: 0 })
  })

  it("claims / min counts claims, not tickets: a tail re-admission takes a ticket but is no claim", async () => {
    const [before, after] = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: ":memory:", policy: { admission: "tail" } })
      const first = yield* queue.stats
      // Twice: the flow (drained in between) is admitted, then its head claimed and acked.
      for (const eventId of ["T1", "T2"]) {
        yield* queue.enqueue({ eventId, flowId: "T", body: {} })
        const claimed = yield* queue.claim
        if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
        yield* queue.settle(claimed.token, { _tag: "Accepted" })
      }
      return [first, yield* queue.stats] as const
    })))
    // The premise: the admissions took tickets as well as the claims.
    expect(after.clock.ticket - before.clock.ticket).toBe(4)
    expect(after.claims - before.claims).toBe(2)
    const rates = Rates.rates([Rates.toSample(0, before), Rates.toSample(60_000, after)])
    expect(rates).toMatchObject({ claimsPerMinute: 2, acksPerMinute: 2 })
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

/** A GET naming `host` in its Host header (fetch does not let a test choose it). */
const getWithHost = (url: string, host: string | undefined, headers: Record<string, string> = {}) =>
  new Promise<{ readonly status: number; readonly body: string }>((resolve, reject) => {
    const request = httpRequest(url, { headers: { ...(host === undefined ? {} : { host }), ...headers } }, (response) => {
      let body = ""
      response.setEncoding("utf8").on("data", (chunk: string) => (body += chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body }))
    })
    request.on("error", reject)
    request.end()
  })

describe("host names", () => {
  let served: Served
  let named: Served
  beforeAll(async () => {
    served = await serve()
    named = await serve({ allowedHosts: ["ops.example.com", "[fd00::7]"] })
  })
  afterAll(async () => {
    await served?.close()
    await named?.close()
  })

  it("answers only to its host names: another Host gets 421 with a short body and nothing of the store", async () => {
    const port = new URL(served.url).port
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST.:${port}`, `[::1]:${port}`, "localhost"]) {
      expect((await getWithHost(`${served.url}/flows`, host)).status, host).toBe(200)
    }
    for (const host of [`evil.example:${port}`, "evil.example", `127.0.0.1.evil.example:${port}`, "localhost@evil", "127.0.0.2"]) {
      const refused = await getWithHost(`${served.url}/flows`, host)
      expect(refused.status, host).toBe(421)
      expect(refused.body, host).not.toContain("account-A")
      expect(refused.body.length, host).toBeLessThan(200)
    }
    // The assets and the event pages too.
    expect((await getWithHost(`${served.url}/event?id=A1`, "evil.example")).status).toBe(421)
    expect((await getWithHost(`${served.url}/assets/app.css`, "evil.example")).status).toBe(421)
  })

  it("answers to the configured host names instead when given", async () => {
    const port = new URL(named.url).port
    expect((await getWithHost(`${named.url}/`, `ops.example.com:${port}`)).status).toBe(200)
    expect((await getWithHost(`${named.url}/`, `[FD00::7]:${port}`)).status).toBe(200)
    expect((await getWithHost(`${named.url}/`, `127.0.0.1:${port}`)).status).toBe(421)
  })

  it("refuses a host list that is empty or names a port or a URL", async () => {
    const queue = {} as never
    for (const allowedHosts of [[], ["localhost:8080"], ["http://localhost"], ["a b"]]) {
      const exit = await Effect.runPromiseExit(Effect.scoped(Dashboard.makeRouter(queue, { allowedHosts })))
      expect(Exit.isFailure(exit) && JSON.stringify(exit.cause), JSON.stringify(allowedHosts)).toContain("DashboardConfigError")
    }
  })
})

describe("operator token guesses", () => {
  const token = "operator-token-0123456789"
  const capture = captureLogs()
  let served: Served
  beforeAll(async () => {
    served = await serve({ redriveToken: token, before: capture.layer })
  })
  afterAll(async () => {
    await served?.close()
  })

  const login = (given: string, next = "/flows") =>
    fetch(`${served.url}/login`, { method: "POST", body: new URLSearchParams({ token: given, next }), redirect: "manual" })

  it("limits wrong logins and wrong bearer tokens per client, logging each, and then refuses even the right token for a while", async () => {
    const statuses: Array<number> = []
    for (let i = 0; i < Auth.AttemptBurst - 1; i++) statuses.push((await login(`wrong-token-${i}-000000`)).status)
    statuses.push((await fetch(`${served.url}/`, { headers: { authorization: "Bearer wrong-token-bearer-0" } })).status)
    expect(statuses).toEqual([...Array(Auth.AttemptBurst - 1).fill(401), 200])
    const limited = await login(token)
    expect(limited.status).toBe(429)
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0)
    expect((await fetch(`${served.url}/`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(429)
    const refused = capture.logs.filter((log) => /login refused|wrong bearer token/.test(log.message))
    expect(refused).toHaveLength(Auth.AttemptBurst)
    expect(refused.every((log) => log.annotations["client"] === "127.0.0.1" || log.annotations["client"] === "::ffff:127.0.0.1")).toBe(true)
    expect(capture.logs.some((log) => /too many failures/.test(log.message))).toBe(true)
  })

  it("spends attempts only on failures and gives them back over time", () => {
    const attempts = new Auth.Attempts(2, 1000)
    expect(attempts.allowed("a", 0)).toBe(true)
    attempts.failed("a", 0)
    attempts.failed("a", 0)
    expect(attempts.allowed("a", 0)).toBe(false)
    expect(attempts.allowed("b", 0)).toBe(true)
    expect(attempts.retryAfter("a", 0)).toBe(1000)
    expect(attempts.allowed("a", 999)).toBe(false)
    expect(attempts.allowed("a", 1000)).toBe(true)
  })
})

describe("the login's next page", () => {
  const token = "operator-token-0123456789"
  let served: Served
  beforeAll(async () => {
    served = await serve({ redriveToken: token })
  })
  afterAll(async () => {
    await served?.close()
  })

  it("a next holding a control character or another origin redirects to the overview, never a 500", async () => {
    for (const next of ["/flows\u0001", "/a\r\nset-cookie: x=1", "//evil.example", "/\\evil.example", "/a//b", "/\\/evil", "https://evil.example", "/caf\u00e9", "/x\u2026"]) {
      const response = await fetch(`${served.url}/login`, { method: "POST", body: new URLSearchParams({ token, next }), redirect: "manual" })
      expect(response.status, JSON.stringify(next)).toBe(303)
      expect(response.headers.get("location"), JSON.stringify(next)).toBe("/")
      const page = await fetch(`${served.url}/login?${new URLSearchParams({ next })}`)
      expect(page.status, JSON.stringify(next)).toBe(200)
    }
    const kept = await fetch(`${served.url}/login`, { method: "POST", body: new URLSearchParams({ token, next: "/event?id=A%2F1" }), redirect: "manual" })
    expect(kept.headers.get("location")).toBe("/event?id=A%2F1")
  })

  it("safeNext keeps only absolute paths of this origin", () => {
    expect(Auth.safeNext("/flows?head=ready")).toBe("/flows?head=ready")
    for (const next of [undefined, "", "flows", "//x", "/\\x", "/a\\b", "/a//b", "/a\u0000", "/a\u007f", "/a b", "http://x/"]) {
      expect(Auth.safeNext(next), JSON.stringify(next)).toBe("/")
    }
  })
})

describe("the suggested redrive command", () => {
  const hostile = "inv-7$(touch X)`touch Y`'q"
  let served: Served
  beforeAll(async () => {
    served = await serve({
      prepare: Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: hostile, flowId: "hostile-flow", body: {} })
        for (const claim of yield* queue.claimBatch(10_000)) {
          if (claim.event.eventId === hostile) yield* queue.settle(claim.token, { _tag: "Rejected", code: "refused" })
        }
      })
    })
  })
  afterAll(async () => {
    await served?.close()
  })

  it("pasted into bash, runs fair-relay with the id as one literal word and nothing else", async () => {
    const body = await (await fetch(`${served.url}/event?${new URLSearchParams({ id: hostile })}`)).text()
    const code = /<code data-testid="redrive-command">([^<]*)<\/code>/.exec(body)?.[1]
    expect(code).toBeDefined()
    const text = code!.replace(/&#39;/g, "'").replace(/&quot;/g, "\"").replace(/&#96;/g, "`").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&")
    const cwd = fs.mkdtempSync(path.join(testTmpDir(), "fair-relay-paste-"))
    try {
      const out = execFileSync("bash", ["-c", `fair-relay() { printf '%s\\0' "$@"; }\n${text}`], { cwd, encoding: "utf8" })
      expect(fs.readdirSync(cwd)).toEqual([])
      expect(out.split("\0").slice(0, -1)).toEqual(["redrive", hostile, "--generation", "1", "--reason", "…"])
    } finally {
      fs.rmSync(cwd, { recursive: true, force: true })
    }
  })
})

describe("operator actions over HTTP: pause, resume and bulk redrive", () => {
  const token = "operator-token-0123456789"
  let served: Served
  beforeAll(async () => {
    served = await serve({
      redriveToken: token,
      // Quarantined heads in two groups (and the fixture's, in none): G1 and G2 of group acme, H1 of group beta.
      prepare: Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueueBatch([
          { eventId: "G1", flowId: "tenant-1", group: "acme", body: { delta: 1 } },
          { eventId: "G2", flowId: "tenant-2", group: "acme", body: { delta: 2 } },
          { eventId: "G3", flowId: "tenant-2", group: "acme", body: { delta: 3 } },
          { eventId: "H1", flowId: "other-1", group: "beta", body: { delta: 4 } }
        ])
        for (const claim of yield* queue.claimBatch(10_000)) {
          if (["G1", "G2", "H1"].includes(claim.event.eventId)) yield* queue.settle(claim.token, { _tag: "Rejected", code: "schema_v2" })
        }
      })
    })
  })
  afterAll(async () => {
    await served?.close()
  })

  const run = <A, E>(f: (queue: RelayQueueService) => Effect.Effect<A, E>) => served.run(Effect.flatMap(RelayQueue, f))
  const auditRows = () => run((q) => q.audit({ limit: 10_000 }))
  const groupPaused = async (group: string) => (await run((q) => q.groups({ limit: 10_000 }))).find((g) => g.groupId === group)?.paused
  const flowPaused = async (flowId: string) => (await run((q) => q.flows({ limit: 10_000 }))).find((f) => f.flowId === flowId)?.paused

  /** Logs in as a browser does: the session cookie, and the CSRF token the pages' forms carry. */
  const session = async () => {
    const login = await fetch(`${served.url}/login`, { method: "POST", body: new URLSearchParams({ token, next: "/groups" }), redirect: "manual" })
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]!
    expect(cookie).toMatch(new RegExp(`^${Auth.CookieName}=.+`))
    const page = await (await fetch(`${served.url}/groups`, { headers: { cookie } })).text()
    const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1]
    expect(csrf).toBeDefined()
    return { cookie, csrf: csrf! }
  }

  const post = (path: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(`${served.url}${path}`, { method: "POST", body: new URLSearchParams(form), headers, redirect: "manual" })

  it("offers the pause and resume forms (flow page, groups page) and the bulk redrive form to an operator only", async () => {
    const { cookie } = await session()
    const anonymous = [
      await (await fetch(`${served.url}/groups`)).text(),
      await (await fetch(`${served.url}/events?flow=tenant-1`)).text(),
      await (await fetch(`${served.url}/redrive-all?group=acme`)).text()
    ]
    for (const body of anonymous) {
      expect(body).not.toMatch(/data-testid="(pause-form-flow|pause-form-group|bulk-form)"/)
      expect(body).toContain("Log in</a>")
    }
    const groups = await (await fetch(`${served.url}/groups`, { headers: { cookie } })).text()
    expect(groups).toMatch(/<form method="post" action="\/pause" data-testid="pause-form-group">[\s\S]*name="reason"[\s\S]*value="pause"[\s\S]*value="resume"/)
    expect(groups).toMatch(/<td class="id">acme<\/td>/)
    const flow = await (await fetch(`${served.url}/events?flow=tenant-1`, { headers: { cookie } })).text()
    expect(flow).toMatch(/data-testid="pause-form-flow">[\s\S]*name="id" value="tenant-1"/)
    const quarantined = await (await fetch(`${served.url}/quarantined`, { headers: { cookie } })).text()
    expect(quarantined).toContain(`data-testid="bulk-entry"`)
    const bulk = await (await fetch(`${served.url}/redrive-all?group=acme`, { headers: { cookie } })).text()
    expect(bulk).toMatch(/data-testid="bulk-form">[\s\S]*name="group" value="acme"[\s\S]*name="reason"[\s\S]*value="preview"/)
  })

  it("refuses a pause or resume without a reason or a name, changing nothing; with them it pauses and resumes a group, one audit row each", async () => {
    const { cookie, csrf } = await session()
    const headers = { cookie }
    const before = await auditRows()
    for (const form of [{ reason: "" }, { reason: "  \n" }, { reason: "tenant migration", actor: " " }]) {
      const refused = await post("/pause", { csrf, kind: "group", id: "acme", action: "pause", actor: "alice", ...form }, headers)
      expect(refused.status, JSON.stringify(form)).toBe(422)
      expect(await refused.text()).toContain(`data-error-tag="InvalidInput"`)
    }
    expect(await groupPaused("acme")).toBe(false)
    expect(await auditRows()).toEqual(before)

    const paused = await post("/pause", { csrf, kind: "group", id: "acme", action: "pause", reason: "tenant migration", actor: "alice" }, headers)
    expect(paused.status).toBe(303)
    expect(paused.headers.get("location")).toBe("/groups?group=acme&done=pause&changed=1")
    expect(await groupPaused("acme")).toBe(true)
    const notice = await (await fetch(`${served.url}${paused.headers.get("location")}`, { headers })).text()
    expect(notice).toContain(`data-testid="pause-notice">Group acme paused.`)
    expect(notice).toMatch(/>acme<\/td>(<td[^>]*>[^<]*<\/td>){4}<td><span class="state quarantined" data-testid="group-paused">paused/)

    const resumed = await post("/pause", { csrf, kind: "group", id: "acme", action: "resume", reason: "migration done", actor: "bob" }, headers)
    expect(resumed.status).toBe(303)
    expect(await groupPaused("acme")).toBe(false)
    const added = (await auditRows()).slice(before.length)
    expect(added.map(({ action, actor, eventId, reason, target }) => ({ action, actor, eventId, reason, target }))).toEqual([
      { action: "pause", actor: "alice", eventId: null, reason: "tenant migration", target: "group:acme" },
      { action: "resume", actor: "bob", eventId: null, reason: "migration done", target: "group:acme" }
    ])
  })

  it("pauses and resumes one flow from its page (bearer token), and answers an unknown flow with TargetNotFound", async () => {
    const bearer = { authorization: `Bearer ${token}` }
    const before = await auditRows()
    const paused = await post("/pause", { kind: "flow", id: "account-A", action: "pause", reason: "receiver down", actor: "script" }, bearer)
    expect(paused.status).toBe(303)
    expect(paused.headers.get("location")).toBe("/events?flow=account-A&done=pause&changed=1")
    expect(await flowPaused("account-A")).toBe(true)
    const again = await post("/pause", { kind: "flow", id: "account-A", action: "pause", reason: "still down", actor: "script" }, bearer)
    expect(again.headers.get("location")).toBe("/events?flow=account-A&done=pause&changed=0")
    const missing = await post("/pause", { kind: "flow", id: "no-such-flow", action: "pause", reason: "typo", actor: "script" }, bearer)
    expect(missing.status).toBe(404)
    expect(await missing.text()).toContain(`data-error-tag="TargetNotFound"`)
    const resumed = await post("/pause", { kind: "flow", id: "account-A", action: "resume", reason: "receiver back", actor: "script" }, bearer)
    expect(resumed.status).toBe(303)
    expect(await flowPaused("account-A")).toBe(false)
    const added = (await auditRows()).slice(before.length)
    expect(added.map((row) => [row.action, row.target, row.reason])).toEqual([
      ["pause", "flow:account-A", "receiver down"],
      ["pause", "flow:account-A", "still down"],
      ["resume", "flow:account-A", "receiver back"]
    ])
  })

  it("refuses a pause, a resume or a bulk redrive posted without a login, without the CSRF token, or from another site", async () => {
    const { cookie, csrf } = await session()
    const before = await run((q) => q.snapshot)
    const pause = { kind: "group", id: "beta", action: "pause", reason: "r", actor: "mallory" }
    const bulk = { group: "beta", reason: "r", actor: "mallory", step: "confirm" }
    for (const [path, form] of [["/pause", pause], ["/redrive-all", bulk]] as const) {
      const cases: ReadonlyArray<readonly [string, Record<string, string>, Record<string, string>]> = [
        ["no login", { ...form, csrf }, {}],
        ["a wrong bearer token", form, { authorization: "Bearer wrong-token-000000" }],
        ["a cookie without the CSRF token", form, { cookie }],
        ["a cookie with a wrong CSRF token", { ...form, csrf: "guess" }, { cookie }],
        ["another site's form", { ...form, csrf }, { cookie, origin: "http://evil.example" }]
      ]
      for (const [name, body, headers] of cases) expect((await post(path, body, headers)).status, `${path}: ${name}`).toBe(403)
    }
    expect(await run((q) => q.snapshot)).toEqual(before)
  })

  it("bulk redrive lists a group's quarantined heads first, refuses a missing reason, and once confirmed redrives them with one audit row each", async () => {
    const { cookie, csrf } = await session()
    const headers = { cookie }
    const form = { csrf, group: "acme", flowPrefix: "", actor: "carol" }
    const before = await run((q) => q.snapshot)

    const noReason = await post("/redrive-all", { ...form, reason: " ", step: "preview" }, headers)
    expect(noReason.status).toBe(422)
    expect(await noReason.text()).toContain(`data-error-tag="InvalidInput"`)
    const noFilter = await post("/redrive-all", { ...form, group: "", reason: "schema v2 deployed", step: "preview" }, headers)
    expect(noFilter.status).toBe(422)

    const preview = await post("/redrive-all", { ...form, reason: "schema v2 deployed", step: "preview" }, headers)
    expect(preview.status).toBe(200)
    const listed = await preview.text()
    expect(listed).toContain(`data-testid="bulk-count">2 quarantined heads of group acme would be released`)
    const listedIds = [...listed.matchAll(/href="\/event\?id=([^"]+)"/g)].map((m) => m[1])
    expect(listedIds).toEqual(["G1", "G2"])
    expect(listed).toContain(`data-testid="bulk-confirm"`)
    const digest = /name="digest" value="([0-9a-f]+)"/.exec(listed)?.[1]
    expect(digest).toBeDefined()
    // The dry run and the refusals changed nothing.
    expect(await run((q) => q.snapshot)).toEqual(before)

    const stale = await post("/redrive-all", { ...form, reason: "schema v2 deployed", step: "confirm", digest: "0".repeat(64) }, headers)
    expect(stale.status).toBe(409)
    expect(await stale.text()).toContain(`data-error-tag="HeadsChanged"`)
    expect(await run((q) => q.snapshot)).toEqual(before)

    const done = await post("/redrive-all", { ...form, reason: "schema v2 deployed", step: "confirm", digest: digest! }, headers)
    expect(done.status).toBe(200)
    expect(await done.text()).toContain(`data-testid="bulk-redriven">Redriven 2 quarantined heads of group acme`)
    const states = await run((q) => Effect.forEach(["G1", "G2", "H1"], (id) => q.inspect(id)))
    expect(states.map(({ event }) => [event.eventId, event.state])).toEqual([["G1", "ready"], ["G2", "ready"], ["H1", "quarantined"]])
    const added = (await auditRows()).slice(before.audit.length)
    expect(added.map(({ action, actor, eventId, generation, reason, target }) => ({ action, actor, eventId, generation, reason, target }))).toEqual(
      states.slice(0, 2).map(({ event }) => ({
        action: "redrive",
        actor: "carol",
        eventId: event.eventId,
        generation: event.generation,
        reason: "schema v2 deployed",
        target: `bulk:{"group":"acme"}`
      }))
    )
  })

  it("bulk redrive by a flow-id prefix lists only the flows with that prefix", async () => {
    const bearer = { authorization: `Bearer ${token}` }
    const preview = await post("/redrive-all", { group: "", flowPrefix: "other-", reason: "retry", actor: "script", step: "preview" }, bearer)
    expect(preview.status).toBe(200)
    const listed = await preview.text()
    expect([...listed.matchAll(/href="\/event\?id=([^"]+)"/g)].map((m) => m[1])).toEqual(["H1"])
    expect((await run((q) => q.inspect("H1"))).event.state).toBe("quarantined")
  })
})

describe("operator actions over HTTP: the policy", () => {
  const token = "operator-token-0123456789"
  let served: Served
  beforeAll(async () => {
    served = await serve({ redriveToken: token })
  })
  afterAll(async () => {
    await served?.close()
  })

  const run = <A, E>(f: (queue: RelayQueueService) => Effect.Effect<A, E>) => served.run(Effect.flatMap(RelayQueue, f))
  const storedPolicy = () => run((q) => q.refreshPolicy)
  const post = (form: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(`${served.url}/policy`, { method: "POST", body: new URLSearchParams(form), headers, redirect: "manual" })
  const session = async () => {
    const login = await fetch(`${served.url}/login`, { method: "POST", body: new URLSearchParams({ token, next: "/policy" }), redirect: "manual" })
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]!
    const page = await (await fetch(`${served.url}/policy`, { headers: { cookie } })).text()
    const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1]
    expect(csrf).toBeDefined()
    return { cookie, csrf: csrf! }
  }

  it("shows the store's policy on a page linked from the navigation, and offers the change form to an operator only", async () => {
    const overview = await (await fetch(`${served.url}/`)).text()
    expect(overview).toContain(`<a href="/policy">Policy</a>`)
    const anonymous = await (await fetch(`${served.url}/policy`)).text()
    // The fixture store's policy: 10 minutes lease, 3 tries, backoff from 10 minutes to an hour.
    expect(anonymous).toContain(`data-testid="policy-leaseTicks">600000 ms`)
    expect(anonymous).toContain(`data-testid="policy-retryBudget">3<`)
    expect(anonymous).toContain(`data-testid="policy-backoffBase">600000 ms`)
    expect(anonymous).toContain(`data-testid="policy-backoffCap">3600000 ms`)
    expect(anonymous).toContain(`data-testid="policy-admission">tail<`)
    expect(anonymous).not.toContain(`data-testid="policy-form"`)
    expect(anonymous).toContain("Log in</a> to change the policy")
    const { cookie } = await session()
    const operator = await (await fetch(`${served.url}/policy`, { headers: { cookie } })).text()
    expect(operator).toMatch(/data-testid="policy-form">[\s\S]*name="leaseTicks"[\s\S]*name="retryBudget"[\s\S]*name="backoffBase"[\s\S]*name="backoffCap"[\s\S]*name="reason"[\s\S]*name="actor"/)
  })

  it("refuses a change without a reason or a name, or with a setting the library does not take, inline and changing nothing", async () => {
    const { cookie, csrf } = await session()
    const before = await run((q) => q.snapshot)
    const policyBefore = await storedPolicy()
    const cases: ReadonlyArray<Record<string, string>> = [
      { leaseTicks: "20s", reason: "", actor: "alice" },
      { leaseTicks: "20s", reason: "  \n", actor: "alice" },
      { leaseTicks: "20s", reason: "slow receiver", actor: " " },
      { leaseTicks: "soon", reason: "slow receiver", actor: "alice" },
      { retryBudget: "0", reason: "slow receiver", actor: "alice" },
      { retryBudget: "many", reason: "slow receiver", actor: "alice" },
      { reason: "nothing named", actor: "alice" }
    ]
    for (const form of cases) {
      const refused = await post({ csrf, ...form }, { cookie })
      expect(refused.status, JSON.stringify(form)).toBe(422)
      const body = await refused.text()
      expect(body, JSON.stringify(form)).toContain(`data-error-tag="InvalidInput"`)
      // The form comes back as typed.
      expect(body).toContain(`name="actor" value="${form.actor!.trim()}"`)
    }
    expect(await storedPolicy()).toEqual(policyBefore)
    expect(await run((q) => q.snapshot)).toEqual(before)
  })

  it("changes the lease, retry budget and backoff with a reason: the store runs them, one audit row, a notice naming what changed; the same again changes nothing", async () => {
    const { cookie, csrf } = await session()
    const auditBefore = await run((q) => q.audit({ limit: 10_000 }))
    const changed = await post({ csrf, leaseTicks: "20s", retryBudget: "5", backoffBase: "1500", backoffCap: "", reason: "slow receiver", actor: "alice" }, { cookie })
    expect(changed.status).toBe(303)
    expect(changed.headers.get("location")).toBe("/policy?done=policy&changed=leaseTicks%2CretryBudget%2CbackoffBase")
    expect(await storedPolicy()).toMatchObject({ leaseTicks: 20_000, retryBudget: 5, backoffBase: 1_500, backoffCap: 3_600_000 })
    const added = (await run((q) => q.audit({ limit: 10_000 }))).slice(auditBefore.length)
    expect(added.map(({ action, actor, eventId, reason, target }) => ({ action, actor, eventId, reason, target }))).toEqual([
      { action: "policy", actor: "alice", eventId: null, reason: "slow receiver", target: `{"leaseTicks":20000,"retryBudget":5,"backoffBase":1500}` }
    ])
    const notice = await (await fetch(`${served.url}${changed.headers.get("location")}`, { headers: { cookie } })).text()
    expect(notice).toContain(`data-testid="policy-notice">Policy changed: lease, retry budget, backoff base.`)
    expect(notice).toContain(`data-testid="policy-leaseTicks">20000 ms`)

    const again = await post({ csrf, leaseTicks: "20000", backoffCap: "1h", reason: "once more", actor: "alice" }, { cookie })
    expect(again.status).toBe(303)
    expect(again.headers.get("location")).toBe("/policy?done=policy")
    const same = await (await fetch(`${served.url}${again.headers.get("location")}`, { headers: { cookie } })).text()
    expect(same).toContain(`data-testid="policy-notice">Nothing changed: the store already runs this policy.`)
    expect((await run((q) => q.audit({ limit: 10_000 }))).length).toBe(auditBefore.length + 1)
  })

  it("changes the retention windows with a reason: the store keeps them, one audit row, the page shows them", async () => {
    const { cookie, csrf } = await session()
    const auditBefore = await run((q) => q.audit({ limit: 10_000 }))
    const changed = await post({ csrf, retainAcked: "2h", retainDedup: "", reason: "disk filling", actor: "alice" }, { cookie })
    expect(changed.status).toBe(303)
    expect(changed.headers.get("location")).toBe("/policy?done=policy&changed=retention.acked")
    const kept = await run((q) => Effect.map(q.refreshPolicy, () => q.retention))
    expect(kept.acked).toBe(2 * 3_600_000)
    const added = (await run((q) => q.audit({ limit: 10_000 }))).slice(auditBefore.length)
    expect(added.map(({ action, actor, reason, target }) => ({ action, actor, reason, target }))).toEqual([
      { action: "policy", actor: "alice", reason: "disk filling", target: `{"retention.acked":7200000}` }
    ])
    const shown = await (await fetch(`${served.url}${changed.headers.get("location")}`, { headers: { cookie } })).text()
    expect(shown).toContain(`data-testid="policy-notice">Policy changed: acked events kept.`)
    expect(shown).toContain(`data-testid="policy-retention-acked">7200000 ms`)
  })

  it("refuses a change posted without a login, with a wrong bearer token, without the CSRF token, or from another site", async () => {
    const { cookie, csrf } = await session()
    const before = await run((q) => q.snapshot)
    const policyBefore = await storedPolicy()
    const form = { leaseTicks: "5s", reason: "r", actor: "mallory" }
    const cases: ReadonlyArray<readonly [string, Record<string, string>, Record<string, string>]> = [
      ["no login", { ...form, csrf }, {}],
      ["a wrong bearer token", form, { authorization: "Bearer wrong-token-000000" }],
      ["a cookie without the CSRF token", form, { cookie }],
      ["a cookie with a wrong CSRF token", { ...form, csrf: "guess" }, { cookie }],
      ["another site's form", { ...form, csrf }, { cookie, origin: "http://evil.example" }]
    ]
    for (const [name, body, headers] of cases) expect((await post(body, headers)).status, name).toBe(403)
    expect(await storedPolicy()).toEqual(policyBefore)
    expect(await run((q) => q.snapshot)).toEqual(before)
  })
})
