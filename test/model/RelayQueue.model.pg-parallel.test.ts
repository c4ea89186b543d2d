/**
 * The model-based test on PostgreSQL with parallel claims (one process: the same outcomes as the
 * model, as with exact claims): `RelayQueue.model.pg.test.ts` with `claims: "parallel"`, in a file
 * of its own so that vitest runs the two modes in two workers at once. FAIR_RELAY_MODEL_PG_RUNS
 * sequences, by default 250; reported as skipped when FAIR_RELAY_PG_URL is not set.
 */
import { describe, it } from "@effect/vitest"
import { pgUrl } from "../support/backends.js"
import { postgres } from "./backends.js"
import { modelSuite, pgRuns } from "./suite.js"

if (pgUrl === undefined) {
  describe("RelayQueue (postgres-parallel) against the reference model", () => {
    it.skip("skipped: FAIR_RELAY_PG_URL is not set", () => {})
  })
} else {
  modelSuite(postgres(pgUrl, "parallel"), pgRuns)
}
