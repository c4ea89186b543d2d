/**
 * What a claim reads, on the server: the store's claim function (`relay_step`) called as the queue
 * calls it, on a session that logs the plan of every statement it runs (`auto_explain`, nested
 * statements, actual rows). An idle claim does not walk the flows that wait (one seek of the wake
 * index finds nothing due); a claim that finds many flows due reads the head it takes and its
 * flow, not every flow's — whatever the state of the store's statistics: none yet (just filled),
 * the flow and event tables analyzed but not the (never written) group table, as autovacuum leaves
 * a store without groups, or every table analyzed on a store whose flows are in groups.
 */
import { it } from "@effect/vitest"
import { Effect } from "effect"
import pg from "pg"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import { defaultPolicy } from "../../src/domain/Policy.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

/** A session on `url` that logs the plans of the statements the functions it calls run; `call` answers them. */
const explaining = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      for (
        const setting of [
          "LOAD 'auto_explain'",
          "SET auto_explain.log_min_duration = 0",
          "SET auto_explain.log_analyze = on",
          "SET auto_explain.log_timing = off",
          "SET auto_explain.log_nested_statements = on",
          "SET client_min_messages = log"
        ]
      ) await client.query(setting)
      return client
    }),
    (client) => Effect.promise(() => client.end())
  ).pipe(Effect.map((client) => ({
    /** The plans of the statements `text` ran, one text each (the top statement's own included). */
    call: (text: string) =>
      Effect.promise(async () => {
        const plans: Array<string> = []
        const listen = (notice: { readonly message?: string | undefined }) => {
          plans.push(notice.message ?? "")
        }
        client.on("notice", listen)
        await client.query(text)
        client.off("notice", listen)
        return plans.filter((plan) => plan.includes("Query Text:") && !plan.includes("relay_step("))
      })
  })))

/**
 * Rows read from `table` by the statements of `plans`: rows × loops of every scan of it (a bitmap
 * scan counted by its heap scan; the rows an UPDATE writes are those its scan read).
 */
const rowsRead = (plans: ReadonlyArray<string>, table: string) =>
  plans.flatMap((plan) => plan.split("\n"))
    .filter((line) => new RegExp(` on ${table}\\b`).test(line) && !/Bitmap Index Scan|^\s*(Update|Insert) on/.test(line))
    .reduce((sum, line) => {
      const actual = /actual rows=(\d+) loops=(\d+)/.exec(line)
      return sum + (actual === null ? 0 : Number(actual[1]) * Number(actual[2]))
    }, 0)

/** A claim of one head at `now`, as the queue calls it with the default policy. */
const claimAt = (parallel: boolean, now: number) =>
  `SELECT relay_step(${parallel}, 30000, ${now}, true, ${defaultPolicy.leaseTicks}, ${defaultPolicy.retryBudget}, ` +
  `${defaultPolicy.backoffBase}, ${defaultPolicy.backoffCap}, false, '{}'::text[], '{}'::bigint[], '{}'::text[], '{}'::text[], '{}'::bigint[], '{}'::float8[], 1)`

describePg("PostgreSQL: what a claim reads", (url) => {
  it.scopedLive("an idle claim does not walk the turn index; a due one does", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, policy: { leaseTicks: "1 hour" } })
      yield* queue.enqueueBatch(Array.from({ length: 200 }, (_, i) => ({ eventId: `e${i}`, flowId: `f${i % 50}`, body: {} })))
      // Every flow's head in flight for an hour: nothing is due.
      expect(yield* queue.claimBatch(50)).toHaveLength(50)
      const session = yield* explaining(schema.url)
      const idle = yield* session.call(claimAt(false, Date.now()))
      expect(idle.length, "the idle claim's statements").toBeGreaterThan(0)
      expect(idle.filter((plan) => plan.includes("relay_flow_turn")), idle.join("\n")).toEqual([])
      expect(rowsRead(idle, "relay_event"), idle.join("\n")).toBe(0)
      // Two hours on, every head is due: the claim walks the index and takes one.
      const due = yield* session.call(claimAt(false, Date.now() + 2 * 3600_000))
      expect(due.some((plan) => plan.includes("relay_flow_turn")), due.join("\n")).toBe(true)
    }), { timeout: 60_000 })

  const cases = [
    { claims: "exact", state: "not gathered yet", analyze: [], flowsRead: Infinity, groups: 0 },
    { claims: "parallel", state: "not gathered yet", analyze: [], flowsRead: Infinity, groups: 0 },
    { claims: "exact", state: "gathered on the flow and event tables only", analyze: ["ANALYZE relay_flow", "ANALYZE relay_event"], flowsRead: 6, groups: 0 },
    { claims: "parallel", state: "gathered on the flow and event tables only", analyze: ["ANALYZE relay_flow", "ANALYZE relay_event"], flowsRead: 6, groups: 0 },
    { claims: "exact", state: "gathered on every table, flows in groups", analyze: ["ANALYZE"], flowsRead: 6, groups: 40 },
    { claims: "parallel", state: "gathered on every table, flows in groups", analyze: ["ANALYZE"], flowsRead: 6, groups: 40 }
  ] as const
  // With no statistics yet, the planner sorts the flows due to keep one (docs/postgres.md, "Known limits").
  for (const { analyze, claims, flowsRead, groups, state } of cases) {
    it.scopedLive(`${claims} claims, statistics ${state}: a claim reads the head it takes${flowsRead === Infinity ? "" : " and its flow"}, not every flow's`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims })
        const flows = 400
        yield* queue.enqueueBatch(Array.from({ length: 2 * flows }, (_, i) => ({
          eventId: `e${i}`,
          flowId: `f${i % flows}`,
          body: {},
          ...(groups === 0 ? {} : { group: `g${i % groups}` })
        })))
        const session = yield* explaining(schema.url)
        for (const statement of analyze) yield* session.call(statement)
        const plans = yield* session.call(claimAt(claims === "parallel", Date.now() + 1000))
        // The head taken, read and then written.
        expect(rowsRead(plans, "relay_event"), plans.join("\n")).toBeLessThanOrEqual(2)
        // The least eligible_at, the flow taken (in a group: its group's), the group's refresh: never every flow.
        if (flowsRead !== Infinity) expect(rowsRead(plans, "relay_flow"), plans.join("\n")).toBeLessThanOrEqual(flowsRead)
      }), { timeout: 60_000 })
  }
})
