/**
 * Concurrent workers on PostgreSQL: several workers, each with its own PgRelayQueue (its own
 * pool, so its own connection and backend), claim and settle concurrently over many flows until
 * every event is acked. Half the workers use single claims/settles, half claimBatch/settleBatch.
 * Each claim's fate is drawn from a seeded generator: the receiver accepts (70 %), asks to retry
 * (15 %), or the worker drops the claim without settling (15 %) and settles it late, in the next
 * phase, after its lease expired (and usually after someone re-claimed it).
 *
 * Time moves in phases: every operation of phase p runs at tick 10·p, and phase p+1 starts when
 * every worker has seen Idle in phase p. A lease (5) and the largest backoff (8) both end before
 * the next phase, so every unfinished head is eligible again then.
 *
 * Checked, from the workers' records:
 *  - no (event, generation) is claimed twice; each event's generations are exactly 1..n;
 *  - per flow, claims come in seq order, and a flow's next claim only after its previous claim
 *    was settled while it counted (Acked/RetryScheduled) or was dropped in an earlier phase
 *    (lease expired): at most one inflight head per flow at any time;
 *  - every in-time settle counts (Acked for Accepted, RetryScheduled for Retry); every late settle
 *    is Stale or Expired and changes nothing;
 * and from the database's own history (an AFTER UPDATE trigger on relay_event logging each
 * transition with a serial id; the writes of one flow are serialized — by the store's advisory
 * lock with exact claims, by the flow's row lock with parallel claims — so within a flow the id
 * order is the commit order):
 *  - the logged claims are exactly the workers' claims;
 *  - replayed in commit order, a flow never has two inflight events, and a claim always takes the
 *    flow's lowest non-acked seq;
 * and at the end every event is acked, generation = lifetime attempts = its claims, and the
 * ticket = all claims. Runs with exact and with parallel claims.
 */
import { seedPolicy } from "../../src/domain/Policy.js"
import { it } from "@effect/vitest"
import { Effect } from "effect"
import { expect } from "vitest"
import type { Claimed, EnqueueInput, RelayQueueService, SettleOutcome } from "../../src/index.js"
import { PgRelayQueue, TickClock } from "../../src/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

const Workers = 6
const Flows = 12
const EventsPerFlow = 6
const PhaseTicks = 10
const MaxPhases = 40
const BatchSize = 3
// Retries never exhaust the budget here: every event must end acked.
const policy = { ...seedPolicy, retryBudget: 1000 }

type Fate = "Accepted" | "Retry" | "drop"

interface ClaimRecord {
  readonly worker: number
  readonly phase: number
  readonly stamp: number
  readonly eventId: string
  readonly flowId: string
  readonly seq: number
  readonly generation: number
  readonly fate: Fate
}

interface SettleRecord {
  readonly worker: number
  readonly phase: number
  readonly eventId: string
  readonly generation: number
  readonly late: boolean
  readonly outcome: SettleOutcome["_tag"]
}

interface Transition {
  readonly id: number
  readonly eventId: string
  readonly flowId: string
  readonly seq: number
  readonly oldState: string
  readonly newState: string
  readonly oldGeneration: number
  readonly newGeneration: number
}

/** A small seeded generator (mulberry32), one per worker. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const flowIds = Array.from({ length: Flows }, (_, i) => `F${String(i).padStart(2, "0")}`)
/** The events; `grouped` puts the flows in three groups (tenants), so claims also lock and charge groups. */
const eventsOf = (grouped: boolean): ReadonlyArray<EnqueueInput> =>
  Array.from({ length: EventsPerFlow }, (_, n) => n + 1).flatMap((seq) =>
    flowIds.map((flowId, i) => ({ eventId: `${flowId}-${seq}`, flowId, body: { delta: seq }, ...(grouped ? { group: `T${i % 3}` } : {}) }))
  )

describePg("PostgreSQL: concurrent workers, each with its own pool", (url) => {
  const variants = [
    { mode: "exact", grouped: false, shape: "" },
    { mode: "parallel", grouped: false, shape: "" },
    { mode: "parallel", grouped: true, shape: " in 3 groups" }
  ] as const
  for (const { grouped, mode, shape } of variants) {
    it.scopedLive(`claims ${mode}: ${Workers} workers drain ${Flows} flows${shape} × ${EventsPerFlow} events: no double claim, per-flow order, all acked`, () =>
      Effect.gen(function*() {
        const events = eventsOf(grouped)
        const schema = yield* freshSchema(url)
        const s = `"${schema.name}"`
        const setup = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, policy, claims: mode })
        yield* setup.enqueueBatch(events).pipe(TickClock.at(0))
        // The database's own history of every event update, in commit order.
        yield* schema.admin.unsafe(`CREATE TABLE ${s}.test_transition (id BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL,
          flow_id TEXT NOT NULL, seq BIGINT NOT NULL, old_state TEXT NOT NULL, new_state TEXT NOT NULL,
          old_generation BIGINT NOT NULL, new_generation BIGINT NOT NULL)`)
        yield* schema.admin.unsafe(`CREATE FUNCTION ${s}.log_transition() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          INSERT INTO ${s}.test_transition (event_id, flow_id, seq, old_state, new_state, old_generation, new_generation)
          VALUES (NEW.event_id, NEW.flow_id, NEW.seq, OLD.state, NEW.state, OLD.generation, NEW.generation);
          RETURN NULL; END $$`)
        yield* schema.admin.unsafe(`CREATE TRIGGER log_transition AFTER UPDATE ON ${s}.relay_event
          FOR EACH ROW EXECUTE FUNCTION ${s}.log_transition()`)

        const workers = yield* Effect.forEach(Array.from({ length: Workers }, (_, i) => i), (index) =>
          Effect.map(PgRelayQueue.make({ url: schema.url, maxConnections: 1, policy, claims: mode }), (queue: RelayQueueService) => ({
            index,
            queue,
            batch: index % 2 === 1,
            next: random(0x5eed + index),
            late: [] as Array<ClaimRecord>
          })))

        let stamp = 0
        const claims: Array<ClaimRecord> = []
        const settles: Array<SettleRecord> = []

        const runPhase = (worker: (typeof workers)[number], phase: number) =>
          Effect.gen(function*() {
            // Claims this worker dropped earlier: their leases have expired by now.
            for (const dropped of worker.late.splice(0)) {
              const outcome = yield* worker.queue.settle(dropped, { _tag: "Accepted" })
              settles.push({ worker: worker.index, phase, eventId: dropped.eventId, generation: dropped.generation, late: true, outcome: outcome._tag })
            }
            for (;;) {
              let got: ReadonlyArray<typeof Claimed.Type>
              if (worker.batch) {
                got = yield* worker.queue.claimBatch(BatchSize)
              } else {
                const one = yield* worker.queue.claim
                got = one._tag === "Idle" ? [] : [one]
              }
              if (got.length === 0) return
              const mine = got.map((claimed): ClaimRecord => {
                const r = worker.next()
                const record: ClaimRecord = {
                  worker: worker.index,
                  phase,
                  stamp: ++stamp,
                  eventId: claimed.event.eventId,
                  flowId: claimed.event.flowId,
                  seq: claimed.event.seq,
                  generation: claimed.token.generation,
                  fate: r < 0.7 ? "Accepted" : r < 0.85 ? "Retry" : "drop"
                }
                claims.push(record)
                return record
              })
              const toSettle = mine.filter((c) => c.fate !== "drop")
              worker.late.push(...mine.filter((c) => c.fate === "drop"))
              const reply = (c: ClaimRecord) =>
                c.fate === "Accepted" ? { _tag: "Accepted" as const } : { _tag: "Retry" as const, reason: "unavailable" }
              const outcomes: ReadonlyArray<SettleOutcome> = worker.batch
                ? toSettle.length === 0 ? [] : yield* worker.queue.settleBatch(toSettle.map((c) => ({ token: c, reply: reply(c) })))
                : yield* Effect.forEach(toSettle, (c) => worker.queue.settle(c, reply(c)))
              toSettle.forEach((c, i) =>
                settles.push({ worker: worker.index, phase, eventId: c.eventId, generation: c.generation, late: false, outcome: outcomes[i]!._tag }))
            }
          }).pipe(TickClock.at(phase * PhaseTicks))

        let phases = 0
        for (let phase = 0; phase < MaxPhases; phase++) {
          phases = phase + 1
          yield* Effect.forEach(workers, (worker) => runPhase(worker, phase), { concurrency: "unbounded", discard: true })
          const snapshot = yield* setup.snapshot
          if (snapshot.events.every((e) => e.state === "acked") && workers.every((w) => w.late.length === 0)) break
        }

        // --- The workers' records.
        const context = `${claims.length} claims, ${settles.length} settles in ${phases} phases`
        const keys = claims.map((c) => `${c.eventId}#${c.generation}`)
        expect(new Set(keys).size, context).toBe(keys.length)
        for (const e of events) {
          const gens = claims.filter((c) => c.eventId === e.eventId).map((c) => c.generation).sort((a, b) => a - b)
          expect(gens, e.eventId).toEqual(Array.from({ length: gens.length }, (_, i) => i + 1))
        }
        for (const s of settles) {
          const claim = claims.find((c) => c.eventId === s.eventId && c.generation === s.generation)!
          const expected = s.late ? ["Stale", "Expired"] : [claim.fate === "Accepted" ? "Acked" : "RetryScheduled"]
          expect(expected, JSON.stringify(s)).toContain(s.outcome)
        }
        const settled = new Map(settles.filter((s) => !s.late).map((s) => [`${s.eventId}#${s.generation}`, s]))
        for (const flowId of flowIds) {
          const ofFlow = claims.filter((c) => c.flowId === flowId).sort((a, b) => a.stamp - b.stamp)
          for (let i = 1; i < ofFlow.length; i++) {
            const [prev, next] = [ofFlow[i - 1]!, ofFlow[i]!]
            const where = `${flowId}: ${JSON.stringify(prev)} then ${JSON.stringify(next)}`
            expect(next.seq, where).toBeGreaterThanOrEqual(prev.seq)
            const prevSettle = settled.get(`${prev.eventId}#${prev.generation}`)
            if (prevSettle !== undefined) {
              expect(prevSettle.outcome, where).not.toMatch(/Stale|Expired/)
              // Retried: the same event again under the next generation; acked: the next seq.
              expect([next.eventId, next.generation], where).toEqual(
                prevSettle.outcome === "Acked" ? [`${flowId}-${prev.seq + 1}`, 1] : [prev.eventId, prev.generation + 1]
              )
            } else {
              // Dropped: the flow waits for the lease to expire (a later phase), then re-claims it.
              expect(prev.fate, where).toBe("drop")
              expect(next.phase, where).toBeGreaterThan(prev.phase)
              expect([next.eventId, next.generation], where).toEqual([prev.eventId, prev.generation + 1])
            }
          }
        }
        // Every kind of path happened (the seeded fates make this stable).
        expect(claims.some((c) => c.fate === "drop") && claims.some((c) => c.fate === "Retry"), context).toBe(true)
        expect(settles.filter((s) => s.late).length, context).toBeGreaterThan(0)

        // --- The database's history, in commit order.
        const rows = yield* schema.admin<Record<string, unknown>>`SELECT * FROM ${schema.admin(schema.name)}.test_transition ORDER BY id`
        const log: ReadonlyArray<Transition> = rows.map((r) => ({
          id: Number(r.id),
          eventId: r.event_id as string,
          flowId: r.flow_id as string,
          seq: Number(r.seq),
          oldState: r.old_state as string,
          newState: r.new_state as string,
          oldGeneration: Number(r.old_generation),
          newGeneration: Number(r.new_generation)
        }))
        const logged = log.filter((t) => t.newGeneration === t.oldGeneration + 1)
        expect(logged.every((t) => t.newState === "inflight"), context).toBe(true)
        expect(logged.map((t) => `${t.eventId}#${t.newGeneration}`).sort(), context).toEqual([...keys].sort())
        const inflight = new Map<string, Set<string>>(flowIds.map((f) => [f, new Set()]))
        const acked = new Map<string, number>(flowIds.map((f) => [f, 0]))
        for (const t of log) {
          const flowInflight = inflight.get(t.flowId)!
          if (t.newGeneration === t.oldGeneration + 1) {
            // A claim: the flow's lowest non-acked seq, and no other event of the flow inflight.
            expect(t.seq, JSON.stringify(t)).toBe(acked.get(t.flowId)! + 1)
            expect([...flowInflight].filter((id) => id !== t.eventId), JSON.stringify(t)).toEqual([])
            flowInflight.add(t.eventId)
          } else {
            expect(t.oldState, JSON.stringify(t)).toBe("inflight")
            expect(t.newGeneration, JSON.stringify(t)).toBe(t.oldGeneration)
            flowInflight.delete(t.eventId)
            if (t.newState === "acked") acked.set(t.flowId, t.seq)
          }
          expect(flowInflight.size, JSON.stringify(t)).toBeLessThanOrEqual(1)
        }

        // --- The end state.
        const final = yield* setup.snapshot
        expect(final.events.filter((e) => e.state !== "acked"), context).toEqual([])
        expect(final.clock.ticket, context).toBe(claims.length)
        for (const e of final.events) {
          const n = claims.filter((c) => c.eventId === e.eventId).length
          expect([e.eventId, e.generation, e.lifetimeAttempts], context).toEqual([e.eventId, n, n])
        }
        expect(final.flows.map((f) => f.seq)).toEqual(flowIds.map(() => EventsPerFlow))
        console.log(`concurrency (${mode}): ${context}; ${settles.filter((s) => s.late).length} late settles ` +
          `(${settles.filter((s) => s.outcome === "Stale").length} Stale, ${settles.filter((s) => s.outcome === "Expired").length} Expired)`)
      }), 120_000)
  }
})
