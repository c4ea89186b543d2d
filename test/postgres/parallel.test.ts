/**
 * Parallel claims on PostgreSQL (`claims: "parallel"`): what the mode promises beyond the contract
 * suite (which runs on it as the "postgres-parallel" backend) and the concurrency test.
 *
 * - A held flow is skipped, not waited for, and never answered with a plain `Idle`: while another
 *   transaction holds a flow's row, a claim takes the next flow; when it holds every eligible
 *   head, the claim reports a wake-up one millisecond away (try again), not the poll interval.
 * - Enqueues do not queue behind claims: an enqueue waits only for a writer of its own flow.
 * - The fairness bound, measured from the database's own history with W concurrent workers: after
 *   a flow's head becomes eligible (its previous event acked), at most (F − 1) + (W − 1) claims of
 *   other flows are made before it is claimed, F flows of weight 1 (each other flow at most once,
 *   plus the claims already in flight when it became eligible). With exact claims the same
 *   measurement is at most F − 1. Measured with workers that claim and settle in two
 *   transactions, and with workers that settle and claim in one, as the worker daemon does.
 * - The store keeps the mode it was created with.
 */
import { it } from "@effect/vitest"
import { Effect, Fiber, Metric } from "effect"
import { expect } from "vitest"
import type { RelayQueueService, Token } from "../../src/index.js"
import { Metrics, PgRelayQueue } from "../../src/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg, holdInTransaction } from "./support.js"

/** A transaction of another connection that holds the rows of `flows` until the scope ends. */
const holdFlows = (url: string, flows: ReadonlyArray<string>) =>
  holdInTransaction(url, "SELECT flow_id FROM relay_flow WHERE flow_id = ANY($1) FOR UPDATE", [flows])

const claimedFlow = (queue: RelayQueueService) =>
  Effect.map(queue.claim, (outcome) => (outcome._tag === "Claimed" ? outcome.event.flowId : outcome))

describePg("PostgreSQL: parallel claims", (url) => {
  it.scopedLive("a held flow is skipped; when every eligible head is held the claim says: again at once", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 2, claims: "parallel" })
      yield* queue.enqueueBatch(["A", "B", "C"].map((flowId) => ({ eventId: `${flowId}1`, flowId, body: {} })))
      const contended = Metric.value(Metrics.contendedClaims)
      const before = (yield* contended).count
      yield* Effect.scoped(Effect.gen(function*() {
        yield* holdFlows(schema.url, ["A"])
        // A is first in turn order but held: B, then C.
        expect(yield* claimedFlow(queue)).toBe("B")
        expect(yield* claimedFlow(queue)).toBe("C")
        // Only A is eligible, and it is held: not idle — a wake-up right away.
        const started = Date.now()
        const outcome = yield* queue.claim
        expect(outcome._tag).toBe("Idle")
        expect(outcome._tag === "Idle" ? outcome.wakeAt : undefined).toBeLessThanOrEqual(Date.now() + 1)
        expect(outcome._tag === "Idle" && outcome.wakeAt! >= started).toBe(true)
      }))
      expect((yield* contended).count).toBe(before + 1)
      // Released: A is claimed; then nothing is eligible — a plain Idle at the lease's end.
      expect(yield* claimedFlow(queue)).toBe("A")
      const idle = yield* queue.claim
      expect(idle._tag).toBe("Idle")
      expect(idle._tag === "Idle" ? idle.wakeAt! - Date.now() : 0).toBeGreaterThan(50_000)
    }))

  it.scopedLive("an enqueue waits for a writer of its own flow only", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 4, claims: "parallel" })
      yield* queue.enqueueBatch([{ eventId: "A1", flowId: "A", body: {} }, { eventId: "B1", flowId: "B", body: {} }])
      const held = yield* Effect.scoped(Effect.gen(function*() {
        yield* holdFlows(schema.url, ["A"])
        // Other flows, old and new, go through while A is held.
        yield* queue.enqueue({ eventId: "B2", flowId: "B", body: {} }).pipe(Effect.timeout("5 seconds"))
        yield* queue.enqueue({ eventId: "N1", flowId: "N", body: {} }).pipe(Effect.timeout("5 seconds"))
        // A's own enqueue waits for A's holder.
        const waiting = yield* Effect.fork(queue.enqueue({ eventId: "A2", flowId: "A", body: {} }))
        yield* Effect.sleep("300 millis")
        return yield* Fiber.poll(waiting).pipe(Effect.map((exit) => ({ waiting, doneWhileHeld: exit._tag === "Some" })))
      }))
      expect(held.doneWhileHeld).toBe(false)
      expect((yield* Fiber.join(held.waiting))._tag).toBe("Enqueued")
      const snapshot = yield* queue.snapshot
      expect(snapshot.events.map((e) => `${e.eventId}@${e.flowId}#${e.seq}`).sort()).toEqual(["A1@A#1", "A2@A#2", "B1@B#1", "B2@B#2", "N1@N#1"])
    }))

  it.scopedLive("a store keeps its claim mode: asking for the other one is a PolicyMismatch, omitting it adopts", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      yield* Effect.scoped(PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims: "parallel" }))
      const refused = yield* Effect.flip(Effect.scoped(PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims: "exact" })))
      expect(refused._tag).toBe("PolicyMismatch")
      expect(refused._tag === "PolicyMismatch" ? refused.settings : []).toEqual(["claims"])
      // Adopted: two processes that omit the mode still claim in parallel (a held flow is skipped).
      const adopted = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1 })
      yield* adopted.enqueueBatch([{ eventId: "A1", flowId: "A", body: {} }, { eventId: "B1", flowId: "B", body: {} }])
      yield* Effect.scoped(Effect.zipRight(holdFlows(schema.url, ["A"]), Effect.map(claimedFlow(adopted), (flow) => expect(flow).toBe("B"))))
      const bad = yield* Effect.flip(Effect.scoped(PgRelayQueue.make({ url: schema.url, claims: "fast" as never })))
      expect(bad._tag).toBe("InvalidInput")
    }))

  const Workers = 8
  const Flows = 16
  const PerFlow = 25

  // Each worker claims and settles in two transactions, or as the worker daemon does: settles what
  // it holds and claims the next in one (`settleAndClaim`; with exact claims its walk goes with the
  // settle's read, and a claim's alone with its clock read).
  it.scopedLive.each([
    ["exact", "claim, settle"],
    ["parallel", "claim, settle"],
    ["exact", "settleAndClaim"],
    ["parallel", "settleAndClaim"]
  ] as const)(
    `claims %s, %s: with ${Workers} workers, a flow that became eligible waits for at most (F − 1) + (W − 1) other claims`,
    ([mode, steps]) =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const s = `"${schema.name}"`
        const setup = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims: mode })
        yield* setup.enqueueBatch(Array.from({ length: PerFlow * Flows }, (_, i) => ({
          eventId: `e${i}`,
          flowId: `F${String(i % Flows).padStart(2, "0")}`,
          body: {}
        })))
        // The database's history: each claim with its ticket and the moment its transaction
        // began (it chose its flow after that), and each moment a flow's next head became
        // eligible — the settle's commit, when claims can see it (the trigger is deferred to it) —
        // with the last ticket drawn by then.
        const lastTicket = mode === "exact" ? `(SELECT ticket FROM ${s}.relay_clock)` : `(SELECT last_value FROM ${s}.relay_ticket)`
        yield* schema.admin.unsafe(`CREATE TABLE ${s}.test_turns (id BIGSERIAL PRIMARY KEY, kind TEXT NOT NULL, flow_id TEXT NOT NULL,
          ticket BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL)`)
        yield* schema.admin.unsafe(`CREATE FUNCTION ${s}.log_turn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          IF NEW.served <> OLD.served THEN
            INSERT INTO ${s}.test_turns (kind, flow_id, ticket, at) VALUES ('claim', NEW.flow_id, NEW.served, transaction_timestamp()); END IF;
          IF NEW.head_seq IS DISTINCT FROM OLD.head_seq AND NEW.head_seq IS NOT NULL THEN
            INSERT INTO ${s}.test_turns (kind, flow_id, ticket, at) VALUES ('eligible', NEW.flow_id, ${lastTicket}, clock_timestamp()); END IF;
          RETURN NULL; END $$`)
        yield* schema.admin.unsafe(
          `CREATE CONSTRAINT TRIGGER log_turn AFTER UPDATE ON ${s}.relay_flow DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION ${s}.log_turn()`
        )

        const workers = yield* Effect.forEach(
          Array.from({ length: Workers }),
          () => PgRelayQueue.make({ url: schema.url, maxConnections: 1 })
        )
        const work = (queue: RelayQueueService): Effect.Effect<void, unknown> =>
          Effect.flatMap(queue.claim, (outcome) =>
            outcome._tag === "Claimed"
              ? Effect.zipRight(queue.settle(outcome.token, { _tag: "Accepted" }), work(queue))
              : outcome.wakeAt !== undefined && outcome.wakeAt <= Date.now() + 1
              ? Effect.suspend(() => work(queue))
              : Effect.void)
        const exchange = (queue: RelayQueueService, held: ReadonlyArray<Token>): Effect.Effect<void, unknown> =>
          Effect.flatMap(queue.settleAndClaim(held.map((token) => ({ token, reply: { _tag: "Accepted" } })), 1), ({ claims, wakeAt }) =>
            claims.length > 0
              ? exchange(queue, claims.map((c) => c.token))
              : wakeAt !== undefined && wakeAt <= Date.now() + 1
              ? Effect.suspend(() => exchange(queue, []))
              : Effect.void)
        yield* Effect.forEach(workers, (queue) => (steps === "settleAndClaim" ? exchange(queue, []) : work(queue)), { concurrency: "unbounded", discard: true })
        const final = yield* setup.snapshot
        expect(final.events.filter((e) => e.state !== "acked")).toEqual([])

        const rows = yield* schema.admin<{ kind: string; flow_id: string; ticket: string; began: string }>`
          SELECT kind, flow_id, ticket, (EXTRACT(EPOCH FROM at) * 1000000)::bigint AS began
          FROM ${schema.admin(schema.name)}.test_turns ORDER BY id`
        const claims = rows.filter((r) => r.kind === "claim").map((r) => ({ flow: r.flow_id, ticket: Number(r.ticket), began: Number(r.began) }))
        expect(new Set(claims.map((c) => c.ticket)).size).toBe(claims.length)
        expect(claims.length).toBe(PerFlow * Flows)
        const waits: Array<number> = []
        for (const eligible of rows.filter((r) => r.kind === "eligible")) {
          const since = Number(eligible.ticket)
          const own = claims.filter((c) => c.flow === eligible.flow_id && c.ticket > since)
          if (own.length === 0) continue
          const next = own.reduce((a, b) => (b.ticket < a.ticket ? b : a))
          // Claims of other flows with a ticket between: those in flight when the head became
          // eligible, and those that chose after it. A claim that began after the one taking the
          // head may have found its row held (skipped, not passed over) and drawn its ticket
          // first (tickets are drawn after the walk): not counted.
          waits.push(claims.filter((c) => c.flow !== eligible.flow_id && c.ticket > since && c.ticket < next.ticket && c.began < next.began).length)
        }
        const bound = mode === "exact" ? Flows - 1 : Flows - 1 + Workers - 1
        const worst = Math.max(...waits)
        console.log(`fairness (${mode}, ${steps}, ${Workers} workers, ${Flows} flows): ${waits.length} waits measured, longest ${worst} claims (bound ${bound})`)
        expect(waits.length).toBeGreaterThan(PerFlow * Flows / 2)
        expect(worst).toBeLessThanOrEqual(bound)
      }),
    120_000
  )
})
