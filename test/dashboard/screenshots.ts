/**
 * Screenshots of the dashboard for the docs, and the first-paint figure of the flows page.
 *
 *   npx tsx test/dashboard/screenshots.ts                    # writes docs/dashboard/*.png
 *   npx tsx test/dashboard/screenshots.ts --first-paint 100000
 *
 * The first reads the fixture store (every state) with a little traffic so the rates and the
 * chart have something to show; the second fills a store with N flows (one event each, through
 * `enqueueBatch`) and loads /flows in headless Chromium five times, printing the browser's
 * first-contentful-paint and the server's response time of each load.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import { chromium } from "playwright-core"
import type { Page } from "playwright-core"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { hasChromium, launchOptions, serve } from "./harness.js"

const token = "operator-token-for-screenshots"
const out = new URL("../../docs/dashboard/", import.meta.url)
const argIndex = process.argv.indexOf("--first-paint")
const firstPaintFlows = argIndex === -1 ? undefined : Number(process.argv[argIndex + 1])

const bulk = (flows: number) =>
  Effect.gen(function*() {
    const queue = yield* RelayQueue
    const started = Date.now()
    for (let i = 0; i < flows; i += 10_000) {
      yield* queue.enqueueBatch(Array.from({ length: Math.min(10_000, flows - i) }, (_, j) => ({
        eventId: `bulk-${String(i + j).padStart(6, "0")}`,
        flowId: `tenant-${String(i + j).padStart(6, "0")}`,
        body: { delta: 1 }
      })))
    }
    console.log(`enqueued ${flows} flows (one event each) in ${Date.now() - started} ms`)
  })

const shoot = async (page: Page, name: string) => {
  await page.screenshot({ path: new URL(`${name}.png`, out).pathname, fullPage: true })
  console.log(`docs/dashboard/${name}.png`)
}

const screenshots = async () => {
  fs.mkdirSync(out, { recursive: true })
  const served = await serve({ redriveToken: token, sampleInterval: "1 second", title: "queue.db", prepare: bulk(40) })
  const browser = await chromium.launch(launchOptions)
  try {
    // A little traffic: claims and acks between the sampler's readings.
    for (let round = 0; round < 8; round++) {
      await served.run(Effect.gen(function*() {
        const queue = yield* RelayQueue
        const claimed = yield* queue.claimBatch(3 + (round % 3) * 2)
        for (const c of claimed) {
          if (c.event.eventId.startsWith("bulk-")) yield* queue.settle(c.token, { _tag: "Accepted" })
        }
      }))
      await new Promise((resolve) => setTimeout(resolve, 1100))
    }
    const page = await browser.newPage({ viewport: { width: 1280, height: 760 } })
    await page.goto(`${served.url}/`)
    await shoot(page, "overview")
    await page.goto(`${served.url}/flows`)
    await shoot(page, "flows")
    await page.goto(`${served.url}/quarantined`)
    await shoot(page, "quarantined")
    await page.goto(`${served.url}/login`)
    await page.fill("input[name=token]", token)
    await Promise.all([page.waitForURL(`${served.url}/`), page.click("form[action$=\"/login\"] button[type=submit]")])
    await page.goto(`${served.url}/event?id=D1`)
    await page.fill("input[name=expectedGeneration]", "1")
    await page.fill("textarea[name=reason]", "receiver limit raised to 1000")
    await page.fill("input[name=actor]", "bob")
    await Promise.all([page.waitForURL(`${served.url}/redrive`), page.click("[data-testid=redrive-form] button[type=submit]")])
    await shoot(page, "event-redrive-refused")
    await page.goto(`${served.url}/audit`)
    await shoot(page, "audit")
  } finally {
    await browser.close()
    await served.close()
  }
}

const firstPaint = async (flows: number) => {
  const served = await serve({ prepare: bulk(flows) })
  const browser = await chromium.launch(launchOptions)
  try {
    const runs: Array<{ fcp: number; response: number }> = []
    for (let i = 0; i < 6; i++) {
      const page = await browser.newPage()
      await page.goto(`${served.url}/flows`)
      // The paint entry may be recorded after the load event: wait for it (buffered observer).
      const timing = await page.evaluate(`new Promise((resolve) => {
        const nav = performance.getEntriesByType("navigation")[0]
        const rows = document.querySelectorAll("[data-testid=flows] tbody tr").length
        new PerformanceObserver((list, observer) => {
          const fcp = list.getEntriesByName("first-contentful-paint")[0]
          if (fcp) { observer.disconnect(); resolve({ fcp: fcp.startTime, response: nav.responseEnd - nav.requestStart, rows }) }
        }).observe({ type: "paint", buffered: true })
      })`) as { fcp: number; response: number; rows: number }
      await page.close()
      // The first load warms the server (module JIT, SQLite page cache); it is not counted.
      if (i > 0) runs.push(timing)
      console.log(`load ${i}: first-contentful-paint ${timing.fcp.toFixed(0)} ms, server response ${timing.response.toFixed(0)} ms, ${timing.rows} rows${i === 0 ? " (warm-up, not counted)" : ""}`)
    }
    const sorted = runs.map((r) => r.fcp).sort((a, b) => a - b)
    console.log(`flows page over ${flows} flows: first-contentful-paint median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms, max ${sorted[sorted.length - 1]!.toFixed(0)} ms`)
  } finally {
    await browser.close()
    await served.close()
  }
}

if (!hasChromium) {
  console.error("no Chromium at /usr/bin/chromium (apt-get install -y chromium)")
  process.exit(1)
}
await (firstPaintFlows === undefined ? screenshots() : firstPaint(firstPaintFlows))
