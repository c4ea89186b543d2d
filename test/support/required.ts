/**
 * vitest globalSetup: the services some tests need, required when the run says so. Without
 * PostgreSQL, PgBouncer or Chromium those tests skip with a warning (a local `npm test` on a
 * machine without them); a run that must prove them — `.ci/run` sets FAIR_RELAY_REQUIRE_PG=1 and
 * FAIR_RELAY_REQUIRE_CHROMIUM=1 — fails at once instead of passing green with them skipped.
 *
 * - FAIR_RELAY_REQUIRE_PG=1: FAIR_RELAY_PG_URL and FAIR_RELAY_PGBOUNCER_URL are set, and each
 *   answers `SELECT 1` (the PostgreSQL tests, the pooler tests).
 * - FAIR_RELAY_REQUIRE_CHROMIUM=1: Chromium is where the browser tests look for it
 *   (test/dashboard/harness.ts).
 */
import * as fs from "node:fs"
import pg from "pg"

/** Where the browser tests look for Chromium (test/dashboard/harness.ts reads the same variable). */
const chromiumPath = (env: NodeJS.ProcessEnv): string => env.FAIR_RELAY_CHROMIUM ?? "/usr/bin/chromium"

const isSet = (value: string | undefined): value is string => value !== undefined && value.trim() !== ""

/**
 * What a run configured by `env` requires but lacks, one line each (empty: nothing). `exists`
 * says whether a file exists; the servers are checked by `unreachable`.
 */
export const missingServices = (env: NodeJS.ProcessEnv, exists: (path: string) => boolean): ReadonlyArray<string> => {
  const missing: Array<string> = []
  if (env.FAIR_RELAY_REQUIRE_PG === "1") {
    if (!isSet(env.FAIR_RELAY_PG_URL)) missing.push("FAIR_RELAY_REQUIRE_PG=1 but FAIR_RELAY_PG_URL is not set: the PostgreSQL tests would skip")
    if (!isSet(env.FAIR_RELAY_PGBOUNCER_URL)) {
      missing.push("FAIR_RELAY_REQUIRE_PG=1 but FAIR_RELAY_PGBOUNCER_URL is not set: the pooler tests would skip")
    }
  }
  if (env.FAIR_RELAY_REQUIRE_CHROMIUM === "1" && !exists(chromiumPath(env))) {
    missing.push(`FAIR_RELAY_REQUIRE_CHROMIUM=1 but there is no Chromium at ${chromiumPath(env)}: the browser tests would skip`)
  }
  return missing
}

/** Why the server at `url` does not answer `SELECT 1` within a few seconds, or undefined when it does. */
export const unreachable = async (name: string, url: string): Promise<string | undefined> => {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 })
  try {
    await client.connect()
    await client.query("SELECT 1")
    return undefined
  } catch (error) {
    return `${name} does not answer: ${error instanceof Error ? error.message : String(error)}`
  } finally {
    await client.end().catch(() => undefined)
  }
}

export default async function setup() {
  const missing = [...missingServices(process.env, fs.existsSync)]
  if (missing.length === 0 && process.env.FAIR_RELAY_REQUIRE_PG === "1") {
    for (const name of ["FAIR_RELAY_PG_URL", "FAIR_RELAY_PGBOUNCER_URL"] as const) {
      const why = await unreachable(name, process.env[name]!)
      if (why !== undefined) missing.push(why)
    }
  }
  if (missing.length > 0) throw new Error(`required services are missing:\n  ${missing.join("\n  ")}`)
}
