/**
 * The dashboard in a real headless Chromium (Debian's `chromium` driven by playwright-core)
 * against a store holding every state. Skipped, saying so in its name, when Chromium is missing.
 */
import { Effect } from "effect"
import { chromium } from "playwright-core"
import type { Browser, BrowserContext, Locator, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { scriptFlow, scriptId } from "./fixture.js"
import { chromiumPath, hasChromium, launchOptions, serve } from "./harness.js"
import type { Served } from "./harness.js"

const token = "operator-token-0123456789"

const suiteName = hasChromium
  ? "dashboard in headless Chromium"
  : `dashboard in headless Chromium — SKIPPED: no Chromium at ${chromiumPath} (apt-get install -y chromium)`
if (!hasChromium) console.warn(`[dashboard] ${suiteName}`)

/** Collects script errors and CSP violations of a page: any of them fails the test. */
const watch = (page: Page) => {
  const problems: Array<string> = []
  page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`))
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`)
  })
  return problems
}

/** The rendered text of the first match (the page is server-rendered: no waiting needed after load). */
const text = async (locator: Locator) => (await locator.first().textContent()) ?? ""
const count = (locator: Locator) => locator.count()
const visible = (locator: Locator) => locator.first().isVisible()

const pwned = (page: Page) => page.evaluate("window.__pwned")

const login = async (page: Page, served: Served) => {
  await page.goto(`${served.url}/login`)
  await page.fill("input[name=token]", token)
  await Promise.all([page.waitForURL(`${served.url}/`), page.click("form[action$=\"/login\"] button[type=submit]")])
  expect(await text(page.getByTestId("access"))).toContain("operator")
}

const eventOf = (served: Served, eventId: string) => served.run(Effect.flatMap(RelayQueue, (q) => q.inspect(eventId)))
const auditOf = (served: Served) => served.run(Effect.flatMap(RelayQueue, (q) => q.audit({ limit: 10_000 })))

describe.skipIf(!hasChromium)(suiteName, () => {
  let browser: Browser
  beforeAll(async () => {
    browser = await chromium.launch(launchOptions)
  })
  afterAll(async () => {
    await browser?.close()
  })

  describe("with redrive enabled", () => {
    let served: Served
    let context: BrowserContext
    beforeAll(async () => {
      served = await serve({ redriveToken: token, refreshSeconds: 1, sampleInterval: "1 second" })
    })
    afterAll(async () => {
      await served?.close()
    })
    beforeAll(async () => {
      context = await browser.newContext()
    })
    afterAll(async () => {
      await context?.close()
    })

    it("loads every page, with store data shown as text, never as markup", async () => {
      const page = await context.newPage()
      const problems = watch(page)

      const overview = await page.goto(`${served.url}/`)
      expect(overview?.status()).toBe(200)
      expect(overview?.headers()["content-security-policy"]).toContain("script-src 'self'")
      expect(await text(page.locator("h1"))).toBe("Overview")
      expect(await text(page.getByTestId("quarantined-count"))).toBe("3")
      expect(await visible(page.locator("svg.chart"))).toBe(true)
      expect(await text(page.locator("#ov-cards"))).toContain("claims / min")

      expect((await page.goto(`${served.url}/flows`))?.status()).toBe(200)
      const flows = page.getByTestId("flows")
      for (const state of ["ready", "waiting", "inflight", "quarantined", "drained"]) {
        expect(await visible(flows.locator(`span.state:text-is("${state}")`).first())).toBe(true)
      }
      expect(await text(flows)).toContain(scriptFlow)
      await page.selectOption("select[name=head]", "quarantined")
      await Promise.all([page.waitForURL(/head=quarantined/), page.click("form.filters >> text=filter")])
      expect(await count(page.getByTestId("flows").locator("tbody tr"))).toBe(3)

      expect((await page.goto(`${served.url}/quarantined`))?.status()).toBe(200)
      const quarantined = page.getByTestId("events")
      for (const id of ["B1", "D1", scriptId]) expect(await text(quarantined)).toContain(id)
      expect(await text(quarantined)).toContain("<script>window.__pwned = 3</script>")

      expect((await page.goto(`${served.url}/events?state=acked`))?.status()).toBe(200)
      expect(await text(page.getByTestId("events"))).toContain("E1")

      expect((await page.goto(`${served.url}/event?id=D1`))?.status()).toBe(200)
      expect(await text(page.getByTestId("event-fields"))).toContain("2 in total")
      expect(await text(page.getByTestId("event-audit"))).toContain("receiver limit raised to 1000")
      expect(await text(page.getByTestId("event-audit"))).toContain("alice")

      await page.goto(`${served.url}/quarantined`)
      await Promise.all([page.waitForURL(/\/event\?id=/), page.getByRole("link", { name: scriptId }).click()])
      expect(await text(page.locator("h1"))).toBe(`Event ${scriptId}`)
      expect(await text(page.getByTestId("body"))).toContain("</pre><script>window.__pwned = 4</script>")

      expect((await page.goto(`${served.url}/audit`))?.status()).toBe(200)
      expect(await text(page.getByTestId("audit"))).toContain("D1")

      expect(await pwned(page)).toBeUndefined()
      expect(problems).toEqual([])
    })

    it("refreshes an open page in place, without reloading it", async () => {
      const page = await context.newPage()
      await page.goto(`${served.url}/events?flow=late`)
      expect(await text(page.getByTestId("events"))).toContain("no events")
      await page.evaluate("window.__sameDocument = true")
      await served.run(Effect.flatMap(RelayQueue, (q) => q.enqueue({ eventId: "late-1", flowId: "late", body: { delta: 1 } })))
      await expect.poll(() => text(page.getByTestId("events")), { timeout: 15_000 }).toContain("late-1")
      expect(await page.evaluate("window.__sameDocument")).toBe(true)
    })

    it("offers no redrive form before login", async () => {
      const page = await (await browser.newContext()).newPage()
      await page.goto(`${served.url}/event?id=B1`)
      expect(await text(page.getByTestId("access"))).toContain("read-only")
      expect(await count(page.getByTestId("redrive-form"))).toBe(0)
      expect(await visible(page.getByRole("link", { name: "Log in" }))).toBe(true)
      await page.context().close()
    })

    it("redrives a quarantined head through the form: the store changes and the audit row exists", async () => {
      const page = await context.newPage()
      await login(page, served)
      const before = await eventOf(served, "B1")
      expect(before.event.state).toBe("quarantined")
      await page.goto(`${served.url}/event?id=B1`)
      await page.fill("textarea[name=reason]", "receiver limit raised to 100000")
      await page.fill("input[name=actor]", "bob")
      await Promise.all([page.waitForURL(/redriven=/), page.click("[data-testid=redrive-form] button[type=submit]")])
      expect(await text(page.getByTestId("redriven"))).toContain(`generation ${before.event.generation + 1}`)

      const after = await eventOf(served, "B1")
      expect(after.event.state).toBe("ready")
      expect(after.event.generation).toBe(before.event.generation + 1)
      expect(after.event.lifetimeAttempts).toBe(before.event.lifetimeAttempts)
      expect(after.audit.map(({ actor, generation, reason }) => ({ actor, generation, reason }))).toEqual([
        { actor: "bob", generation: before.event.generation + 1, reason: "receiver limit raised to 100000" }
      ])
      expect(await text(page.getByTestId("event-audit"))).toContain("bob")
      expect(await count(page.getByTestId("redrive-form"))).toBe(0)
    })

    it("shows a refused redrive's typed error inline and changes nothing", async () => {
      const page = await context.newPage()
      await login(page, served)
      const before = await eventOf(served, "D1")
      const auditBefore = await auditOf(served)
      const cases: ReadonlyArray<{ readonly tag: string; readonly generation?: string; readonly reason?: string; readonly eventId?: string }> = [
        { tag: "GenerationMismatch", generation: String(before.event.generation + 5) },
        { tag: "MissingReason", reason: "   " },
        { tag: "NotQuarantined", eventId: "A3" },
        { tag: "EventNotFound", eventId: "no-such-event" },
        { tag: "InvalidInput", generation: "two" }
      ]
      for (const c of cases) {
        await page.goto(`${served.url}/event?id=D1`)
        if (c.generation !== undefined) await page.fill("input[name=expectedGeneration]", c.generation)
        await page.fill("textarea[name=reason]", c.reason ?? "try again")
        await page.fill("input[name=actor]", "carol")
        if (c.eventId !== undefined) {
          await page.evaluate(`document.querySelector("input[name=eventId]").value = ${JSON.stringify(c.eventId)}`)
        }
        await Promise.all([page.waitForURL(`${served.url}/redrive`), page.click("[data-testid=redrive-form] button[type=submit]")])
        expect(await visible(page.locator(`[data-error-tag="${c.tag}"]`)), c.tag).toBe(true)
      }
      // Refused inline, with the operator's input kept for a second try.
      await page.goto(`${served.url}/event?id=D1`)
      await page.fill("input[name=expectedGeneration]", "99")
      await page.fill("textarea[name=reason]", "kept reason")
      await page.fill("input[name=actor]", "carol")
      await Promise.all([page.waitForURL(`${served.url}/redrive`), page.click("[data-testid=redrive-form] button[type=submit]")])
      expect(await text(page.locator("[data-error-tag=GenerationMismatch]"))).toContain(`generation ${before.event.generation}, not 99`)
      expect(await page.locator("textarea[name=reason]").inputValue()).toBe("kept reason")

      expect(await eventOf(served, "D1")).toEqual(before)
      expect(await eventOf(served, "A3").then((e) => e.event.state)).toBe("ready")
      expect(await auditOf(served)).toEqual(auditBefore)
    })

    it("refuses a POST without the session's CSRF token, and one from another origin", async () => {
      const page = await context.newPage()
      await login(page, served)
      const before = await eventOf(served, "D1")
      const form = { eventId: "D1", expectedGeneration: String(before.event.generation), reason: "forged", actor: "mallory" }
      const noCsrf = await page.request.post(`${served.url}/redrive`, { form })
      expect(noCsrf.status()).toBe(403)
      expect(await noCsrf.text()).toContain("CSRF")
      const wrongCsrf = await page.request.post(`${served.url}/redrive`, { form: { ...form, csrf: "guess" } })
      expect(wrongCsrf.status()).toBe(403)
      const csrf = await page.goto(`${served.url}/event?id=D1`).then(() => page.locator("input[name=csrf]").first().inputValue())
      const crossSite = await page.request.post(`${served.url}/redrive`, { form: { ...form, csrf }, headers: { origin: "http://evil.example" } })
      expect(crossSite.status()).toBe(403)
      const badBearer = await page.context().request.post(`${served.url}/redrive`, { form, headers: { authorization: "Bearer not-the-token" } })
      expect(badBearer.status()).toBe(403)
      expect(await eventOf(served, "D1")).toEqual(before)
    })
  })

  describe("read-only (no token)", () => {
    let served: Served
    beforeAll(async () => {
      served = await serve({})
    })
    afterAll(async () => {
      await served?.close()
    })

    it("at phone width (390 px) no page is wider than the screen: the navigation wraps", async () => {
      const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 1 })
      const page = await context.newPage()
      for (const path of ["/", "/flows", "/quarantined", "/events", "/event?id=B1", "/audit", "/policy"]) {
        await page.goto(`${served.url}${path}`)
        const { client, scroll } = await page.evaluate<{ scroll: number; client: number }>(
          "({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })"
        )
        expect(client, path).toBe(390)
        expect(scroll, `${path} overflows by ${scroll - client}px`).toBeLessThanOrEqual(client)
      }
      await context.close()
    })

    it("has no redrive form, no login, and refuses every POST", async () => {
      const context = await browser.newContext()
      const page = await context.newPage()
      await page.goto(`${served.url}/event?id=B1`)
      expect(await text(page.getByTestId("access"))).toBe("read-only")
      expect(await count(page.locator("form[method=post]"))).toBe(0)
      expect(await count(page.locator("input[name=csrf]"))).toBe(0)
      expect(await text(page.locator(".redrive"))).toContain("This dashboard is read-only")
      expect((await page.goto(`${served.url}/login`))?.status()).toBe(404)
      const before = await eventOf(served, "B1")
      const post = await context.request.post(`${served.url}/redrive`, {
        form: { eventId: "B1", expectedGeneration: String(before.event.generation), reason: "x", actor: "y" },
        headers: { authorization: `Bearer ${token}` }
      })
      expect(post.status()).toBe(403)
      expect(await post.text()).toContain("ReadOnly")
      expect(await eventOf(served, "B1")).toEqual(before)
      await context.close()
    })
  })
})
