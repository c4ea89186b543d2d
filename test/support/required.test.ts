/**
 * A run that requires PostgreSQL, PgBouncer or Chromium (`.ci/run`) fails when the tests that need
 * them would skip; a run that does not require them lets them skip.
 */
import { describe, expect, it } from "@effect/vitest"
import * as net from "node:net"
import { missingServices, unreachable } from "./required.js"

const urls = { FAIR_RELAY_PG_URL: "postgres://postgres@127.0.0.1:5432/x", FAIR_RELAY_PGBOUNCER_URL: "postgres://postgres@127.0.0.1:6433" }
const none = () => false
const any = () => true

describe("missingServices", () => {
  it("requires nothing unless the run asks for it", () => {
    expect(missingServices({}, none)).toEqual([])
  })

  it("FAIR_RELAY_REQUIRE_PG=1 requires both the server's and the pooler's URL", () => {
    expect(missingServices({ FAIR_RELAY_REQUIRE_PG: "1" }, any)).toEqual([
      expect.stringContaining("FAIR_RELAY_PG_URL is not set"),
      expect.stringContaining("FAIR_RELAY_PGBOUNCER_URL is not set")
    ])
    expect(missingServices({ FAIR_RELAY_REQUIRE_PG: "1", FAIR_RELAY_PG_URL: urls.FAIR_RELAY_PG_URL, FAIR_RELAY_PGBOUNCER_URL: " " }, any))
      .toEqual([expect.stringContaining("FAIR_RELAY_PGBOUNCER_URL is not set")])
    expect(missingServices({ FAIR_RELAY_REQUIRE_PG: "1", ...urls }, none)).toEqual([])
  })

  it("FAIR_RELAY_REQUIRE_CHROMIUM=1 requires Chromium where the browser tests look for it", () => {
    const seen: Array<string> = []
    const exists = (path: string) => (seen.push(path), false)
    expect(missingServices({ FAIR_RELAY_REQUIRE_CHROMIUM: "1" }, exists)).toEqual([expect.stringContaining("no Chromium at /usr/bin/chromium")])
    expect(missingServices({ FAIR_RELAY_REQUIRE_CHROMIUM: "1", FAIR_RELAY_CHROMIUM: "/opt/c" }, exists)).toEqual([
      expect.stringContaining("no Chromium at /opt/c")
    ])
    expect(seen).toEqual(["/usr/bin/chromium", "/opt/c"])
    expect(missingServices({ FAIR_RELAY_REQUIRE_CHROMIUM: "1" }, any)).toEqual([])
  })
})

describe("unreachable", () => {
  it("names a server that refuses the connection", async () => {
    // A port just released: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, "127.0.0.1", () => {
        const { port } = server.address() as net.AddressInfo
        server.close(() => resolve(port))
      })
    })
    expect(await unreachable("FAIR_RELAY_PG_URL", `postgres://postgres@127.0.0.1:${port}/x`)).toMatch(/^FAIR_RELAY_PG_URL does not answer: /)
  })

  it.skipIf(process.env.FAIR_RELAY_PG_URL === undefined)("passes a server that answers (needs FAIR_RELAY_PG_URL)", async () => {
    expect(await unreachable("FAIR_RELAY_PG_URL", process.env.FAIR_RELAY_PG_URL!)).toBeUndefined()
  })
})
