/**
 * The in-process scenarios of docs/protocol.md (1, 2, 4–12, 19–21), on real SQLite files, and those
 * of the features beyond the seed (22: tail admission, 23: tenant fairness).
 */
import Database from "better-sqlite3"
import { Effect, Ref } from "effect"
import * as path from "node:path"
import type { DeliveryReply } from "../src/domain/Outcomes.js"
import { arrow, stores } from "./Scenario.js"
import type { Context, Scenario } from "./Scenario.js"
import { makeWorld } from "./World.js"
import type { World } from "./World.js"

const enqueueAll = (w: World, events: ReadonlyArray<readonly [id: string, flow: string, delta: number]>) =>
  Effect.forEach(events, ([eventId, flowId, delta]) => w.queue.enqueue({ eventId, flowId, body: { delta } }), { discard: true })

/** Runs worker steps, returning the claimed ids ("idle" for an idle claim). */
const steps = (w: World, n: number) =>
  Effect.map(Effect.replicateEffect(w.step, n), (results) => results.map((r) => r?.eventId ?? "idle"))

const tag = (value: { readonly _tag: string }) => value._tag

/** Runs `effect`, expecting a typed error; returns its tag, or "succeeded". */
const errorTag = <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.match(effect, { onFailure: (e) => e._tag, onSuccess: () => "succeeded" })

/** Installs a trigger that makes inserts into `table` fail, through a separate connection. */
const rejectInserts = (file: string, table: string) =>
  Effect.sync(() => {
    const db = new Database(file)
    db.exec(`CREATE TRIGGER reject_${table} BEFORE INSERT ON ${table} BEGIN SELECT RAISE(ABORT, 'injected failure'); END`)
    db.close()
  })

const roundRobin: Scenario = {
  name: "round_robin",
  title: "three flows, three events each, all ready at tick 0",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world()
      yield* enqueueAll(w, ["A", "B", "C"].flatMap((f) => [1, 2, 3].map((i) => [`${f}${i}`, f, i] as const)))
      const order = yield* steps(w, 9)
      ctx.say(`dispatched ${arrow(order)}`)
      ctx.check("dispatch order", ["A1", "B1", "C1", "A2", "B2", "C2", "A3", "B3", "C3"], order)
      ctx.fact("dispatched", order)
      ctx.fact("stores", yield* stores(w))
    })
}

const starvation: Scenario = {
  name: "first_unacked_starvation",
  title: "a permanent id conflict at A1: naive first-unacked relay vs the fair relay",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world()
      yield* w.inbox.receive({ eventId: "A1", flowId: "Z", seq: 1, body: { delta: 99 } })
      yield* enqueueAll(w, [["A1", "A", 1], ["B1", "B", 1]])
      const naive: Array<string> = []
      for (let i = 0; i < 5; i++) {
        const first = (yield* w.queue.snapshot).events.find((e) => e.state !== "acked")!
        const reply = yield* w.inbox.receive({ eventId: first.eventId, flowId: first.flowId, seq: first.seq, body: first.body })
        naive.push(`${first.eventId}:${tag(reply)}`)
      }
      ctx.say(`naive relay, 5 steps: ${arrow(naive)} (never reaches B)`)
      const fair = yield* Effect.replicateEffect(w.step, 2)
      const fairIds = fair.map((r) => `${r!.eventId}:${tag(r!.outcome)}`)
      ctx.say(`fair relay, 2 steps: ${arrow(fairIds)}`)
      ctx.check("naive relay picks A1 every time", ["A1", "A1", "A1", "A1", "A1"], naive.map((s) => s.split(":")[0]))
      ctx.check("fair relay step 2", "B1", fair[1]?.eventId)
      ctx.fact("naive", naive)
      ctx.fact("fair", fairIds)
    })
}

const retryBackoff: Scenario = {
  name: "retry_backoff",
  title: "A1's receiver is unavailable every time; B1 is ready too",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world()
      yield* enqueueAll(w, [["A1", "A", 1], ["B1", "B", 1]])
      const unavailable: DeliveryReply = { _tag: "Retry", reason: "unavailable" }
      const timeline: Array<string> = []
      const attempt = (tick: number) =>
        Effect.gen(function*() {
          yield* ctx.at(tick)
          const claimed = yield* w.queue.claim
          if (claimed._tag === "Idle") return timeline.push(`t${tick}: idle`)
          if (claimed.event.flowId !== "A") {
            const done = yield* w.queue.settle(claimed.token, yield* w.deliver(claimed))
            return timeline.push(`t${tick}: ${claimed.event.eventId} ${tag(done)}`)
          }
          const outcome = yield* w.queue.settle(claimed.token, unavailable)
          return timeline.push(`t${tick}: A1 ${outcome._tag}${outcome._tag === "RetryScheduled" ? `{nextAt: ${outcome.nextAt}}` : ""}`)
        })
      for (const tick of [0, 0, 1, 2, 5, 6]) yield* attempt(tick)
      for (const line of timeline) ctx.say(line)
      ctx.check("timeline", [
        "t0: A1 RetryScheduled{nextAt: 2}",
        "t0: B1 Acked",
        "t1: idle",
        "t2: A1 RetryScheduled{nextAt: 6}",
        "t5: idle",
        "t6: A1 Quarantined"
      ], timeline)
      ctx.fact("timeline", timeline)
      ctx.fact("stores", yield* stores(w))
    })
}

const staleAfterReclaim: Scenario = {
  name: "stale_after_reclaim",
  title: "A1 claimed at 0 and re-claimed at 5; both workers deliver",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world()
      yield* enqueueAll(w, [["A1", "A", 4]])
      const old = yield* w.claim
      yield* ctx.at(5)
      const fresh = yield* w.claim
      const oldReply = yield* w.deliver(old)
      const oldSettle = yield* w.queue.settle(old.token, oldReply)
      const newReply = yield* w.deliver(fresh)
      const newSettle = yield* w.queue.settle(fresh.token, newReply)
      const seen = [`gen ${old.token.generation}: ${tag(oldReply)} → ${tag(oldSettle)}`, `gen ${fresh.token.generation}: ${tag(newReply)} → ${tag(newSettle)}`]
      for (const line of seen) ctx.say(line)
      const end = yield* stores(w)
      ctx.say(`receipts ${end.receipts.length}, total A = ${end.totals.A}`)
      ctx.check("old worker", "gen 1: Accepted → Stale", seen[0])
      ctx.check("new worker", "gen 2: Duplicate → Acked", seen[1])
      ctx.check("receipts (one effect)", 1, end.receipts.length)
      ctx.fact("workers", seen)
      ctx.fact("stores", end)
    })
}

const expiredLease: Scenario = {
  name: "expired_lease",
  title: "claimed at 0, nobody re-claims, the same worker settles at 5",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world()
      yield* enqueueAll(w, [["A1", "A", 1]])
      const claimed = yield* w.claim
      yield* ctx.at(5)
      const outcome = yield* w.queue.settle(claimed.token, { _tag: "Accepted" })
      ctx.say(`lease until ${claimed.leaseUntil}; settle at 5 → ${tag(outcome)}`)
      ctx.check("settle at 5", "Expired", tag(outcome))
      ctx.fact("stores", yield* stores(w))
    })
}

const quarantineIsolates: Scenario = {
  name: "quarantine_isolates_flow",
  title: "A1 hits a permanent id conflict; A2 waits behind it, B1 completes",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world()
      yield* w.inbox.receive({ eventId: "A1", flowId: "Z", seq: 1, body: { delta: 5 } })
      yield* enqueueAll(w, [["A1", "A", 1], ["A2", "A", 2], ["B1", "B", 3]])
      const order = yield* steps(w, 3)
      yield* ctx.at(100)
      order.push(...(yield* steps(w, 1)))
      ctx.say(`dispatched ${arrow(order)}`)
      const end = yield* stores(w)
      const states = end.events.map((e) => `${e.eventId}:${e.state}`)
      ctx.say(`states ${states.join(" ")}`)
      ctx.check("dispatched", ["A1", "B1", "idle", "idle"], order)
      ctx.check("states", ["A1:quarantined", "A2:ready", "B1:acked"], states)
      ctx.fact("stores", end)
    })
}

const redriveAfterFix: Scenario = {
  name: "redrive_after_fix",
  title: "A1 (delta 10) refused at limit 5; limit raised to 1000; A1 redriven",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world({ maxDelta: 5 })
      yield* enqueueAll(w, [["A1", "A", 10], ["A2", "A", 1], ["B1", "B", 2]])
      const before = yield* steps(w, 3)
      ctx.say(`limit 5: ${arrow(before)}`)
      yield* Ref.set(w.maxDelta, 1000)
      const redriven = yield* w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "receiver limit raised to 1000" })
      ctx.say(`redrive A1 → generation ${redriven.generation}`)
      const after = yield* steps(w, 3)
      ctx.say(`limit 1000: ${arrow(after)}`)
      const end = yield* stores(w)
      const a1 = end.events.find((e) => e.eventId === "A1")!
      ctx.say(`A last seq ${end.progress.A}, total ${end.totals.A}, audit rows ${end.audit.length}, A1 lifetime attempts ${a1.lifetimeAttempts}`)
      ctx.check("before the fix", ["A1", "B1", "idle"], before)
      ctx.check("after the redrive", ["A1", "A2", "idle"], after)
      ctx.check("A last applied seq", 2, end.progress.A)
      ctx.check("A total", 11, end.totals.A)
      ctx.check("audit rows", 1, end.audit.length)
      ctx.check("A1 lifetime attempts", 2, a1.lifetimeAttempts)
      ctx.fact("stores", end)
    })
}

const redriveGuards: Scenario = {
  name: "redrive_guards",
  title: "wrong generation, not quarantined, blank reason, unknown id",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world({ maxDelta: 5 })
      yield* enqueueAll(w, [["A1", "A", 10], ["B1", "B", 1]])
      yield* steps(w, 1)
      const before = yield* stores(w)
      const errors = {
        wrongGeneration: yield* errorTag(w.queue.redrive({ eventId: "A1", expectedGeneration: 9, reason: "fix" })),
        notQuarantined: yield* errorTag(w.queue.redrive({ eventId: "B1", expectedGeneration: 0, reason: "fix" })),
        blankReason: yield* errorTag(w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "   " })),
        unknownId: yield* errorTag(w.queue.redrive({ eventId: "ZZ", expectedGeneration: 1, reason: "fix" }))
      }
      for (const [what, error] of Object.entries(errors)) ctx.say(`${what} → ${error}`)
      ctx.check("errors", {
        wrongGeneration: "GenerationMismatch",
        notQuarantined: "NotQuarantined",
        blankReason: "MissingReason",
        unknownId: "EventNotFound"
      }, errors)
      ctx.check("stores unchanged", before, yield* stores(w))
      ctx.fact("errors", errors)
    })
}

const enqueueIdempotency: Scenario = {
  name: "enqueue_idempotency",
  title: "the same id again: same flow and body, another body, another flow",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world()
      const first = yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
      const same = yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
      const otherBody = yield* errorTag(w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 2 } }))
      const otherFlow = yield* errorTag(w.queue.enqueue({ eventId: "A1", flowId: "B", body: { delta: 1 } }))
      const flows = (yield* w.queue.snapshot).flows.map((f) => `${f.flowId}:${f.seq}`)
      const seen = { first: tag(first), same: tag(same), otherBody, otherFlow, flows }
      ctx.say(`first ${seen.first}, again ${seen.same}, other body ${otherBody}, other flow ${otherFlow}; flow seqs ${flows.join(" ")}`)
      ctx.check("outcomes", { first: "Enqueued", same: "Existing", otherBody: "EnqueueConflict", otherFlow: "EnqueueConflict", flows: ["A:1"] }, seen)
      ctx.fact("outcomes", seen)
    })
}

const clockRegression: Scenario = {
  name: "clock_regression",
  title: "every write at tick 9 after the store reached tick 10",
  run: (ctx) =>
    Effect.gen(function*() {
      const w = yield* ctx.world()
      yield* enqueueAll(w, [["A1", "A", 1]])
      yield* ctx.at(10)
      const claimed = yield* w.claim
      const before = yield* stores(w)
      yield* ctx.at(9)
      const errors = {
        enqueue: yield* errorTag(w.queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 1 } })),
        claim: yield* errorTag(w.queue.claim),
        settle: yield* errorTag(w.queue.settle(claimed.token, { _tag: "Accepted" })),
        redrive: yield* errorTag(w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "fix" }))
      }
      for (const [what, error] of Object.entries(errors)) ctx.say(`${what} at 9 → ${error}`)
      ctx.check("errors", { enqueue: "ClockRegressed", claim: "ClockRegressed", settle: "ClockRegressed", redrive: "ClockRegressed" }, errors)
      ctx.check("stores unchanged", before, yield* stores(w))
      ctx.fact("errors", errors)
    })
}

/** Scenario 12's workload under an admission policy. */
const arrivals = (ctx: Context, admission: "seed" | "tail") =>
  Effect.gen(function*() {
    const w = yield* ctx.world({ policy: { admission } })
    yield* enqueueAll(w, [["A1", "A", 1], ["A2", "A", 2]])
    const order = yield* steps(w, 1)
    for (const flow of ["B", "C", "D"]) {
      yield* w.queue.enqueue({ eventId: `${flow}1`, flowId: flow, body: { delta: 1 } })
      order.push(...(yield* steps(w, 1)))
    }
    order.push(...(yield* steps(w, 1)))
    return order
  })

const newFlowsOvertake: Scenario = {
  name: "new_flows_overtake",
  title: "A has A1, A2; B1, C1, D1 arrive one by one after A1 is dispatched (seed admission)",
  run: (ctx) =>
    Effect.gen(function*() {
      const order = yield* arrivals(ctx, "seed")
      ctx.say(`dispatched ${arrow(order)} (the documented limit of served = 0 for new flows)`)
      ctx.check("dispatch order", ["A1", "B1", "C1", "D1", "A2"], order)
      ctx.fact("dispatched", order)
    })
}

const newFlowsTail: Scenario = {
  name: "new_flows_tail",
  title: "the same arrivals under admission \"tail\": newcomers queue behind A",
  run: (ctx) =>
    Effect.gen(function*() {
      const order = yield* arrivals(ctx, "tail")
      ctx.say(`dispatched ${arrow(order)} (each arrival takes the next ticket, behind every waiting flow)`)
      ctx.check("A2 is not overtaken", ["A1", "A2", "B1", "C1", "D1"], order)
      ctx.fact("dispatched", order)
    })
}

/** Scenario 23's tenants: A spreads its backlog over many flows, B has one. */
const TenantAFlows = 50
const TenantAEvents = 3
const TenantBEvents = 60
/** Two claims per flow of A and two of B's: long enough for a pattern, short of draining anyone. */
const TenantClaims = 2 * (TenantAFlows + 1)

/**
 * Scenario 23's workload in a store of its own (`label`): A's flows, then B's, all backlogged
 * at tick 0 under tail admission, with their groups or without; then `TenantClaims` worker steps.
 * Returns the flow of each claim and the groups as the queue lists them.
 */
const tenantRun = (ctx: Context, label: string, grouped: boolean) =>
  Effect.gen(function*() {
    const w = yield* makeWorld({
      queueFile: path.join(ctx.dir, `${label}-queue.db`),
      inboxFile: path.join(ctx.dir, `${label}-inbox.db`),
      policy: { admission: "tail" }
    })
    const flowOf = (tenant: "A" | "B", n: number) => `${tenant}-${String(n).padStart(2, "0")}`
    const workload = [
      ...Array.from({ length: TenantAFlows }, (_, f) => ({ tenant: "A", flowId: flowOf("A", f + 1), events: TenantAEvents })),
      { tenant: "B", flowId: flowOf("B", 1), events: TenantBEvents }
    ]
    yield* w.queue.enqueueBatch(workload.flatMap(({ events, flowId, tenant }) =>
      Array.from({ length: events }, (_, i) => ({
        eventId: `${flowId}#${i + 1}`,
        flowId,
        body: { delta: 1 },
        ...(grouped ? { group: tenant } : {})
      }))
    ))
    const flows = (yield* steps(w, TenantClaims)).map((id) => id.split("#")[0]!)
    return { flows, tenants: flows.map((flow) => flow.charAt(0)), groups: yield* w.queue.groups() }
  })

/** The 1-based positions of B's claims. */
const claimsOfB = (tenants: ReadonlyArray<string>) => tenants.flatMap((t, i) => (t === "B" ? [i + 1] : []))

/** Claim positions as a short list: `2, 4, 6 … 102`. */
const positions = (list: ReadonlyArray<number>) => (list.length <= 4 ? list.join(", ") : `${list.slice(0, 3).join(", ")} … ${list.at(-1)}`)

const tenantFairness: Scenario = {
  name: "tenant_fairness",
  title: `tenant A with ${TenantAFlows} backlogged flows, tenant B with one: with groups, and without`,
  run: (ctx) =>
    Effect.gen(function*() {
      const grouped = yield* tenantRun(ctx, "grouped", true)
      const ungrouped = yield* tenantRun(ctx, "ungrouped", false)
      const b = { grouped: claimsOfB(grouped.tenants), ungrouped: claimsOfB(ungrouped.tenants) }
      const aFlows = grouped.flows.filter((flow) => flow.startsWith("A"))
      ctx.say(`with groups: B at claims ${positions(b.grouped)} (${b.grouped.length} of ${TenantClaims}: every other claim)`)
      ctx.say(`  A's claims rotate across its flows: ${arrow([...aFlows.slice(0, 3), "…", ...aFlows.slice(-2)])}`)
      ctx.say(`without groups: B at claims ${positions(b.ungrouped)} (${b.ungrouped.length} of ${TenantClaims}: 1 in ${TenantAFlows + 1})`)
      ctx.check("with groups, B gets every other claim", Array.from({ length: TenantClaims / 2 }, (_, i) => 2 * (i + 1)), b.grouped)
      ctx.check(`with groups, A's first ${TenantAFlows} claims reach each of its flows once`, TenantAFlows, new Set(aFlows.slice(0, TenantAFlows)).size)
      ctx.check(`without groups, B gets 1 claim in ${TenantAFlows + 1}`, [TenantAFlows + 1, 2 * (TenantAFlows + 1)], b.ungrouped)
      ctx.check("groups listed", [["A", TenantAFlows, TenantAFlows], ["B", 1, 1]], grouped.groups.map((g) => [g.groupId, g.flows, g.waiting]))
      ctx.check("no groups without them", [], ungrouped.groups)
      ctx.fact("grouped", { tenants: grouped.tenants.join(""), groups: grouped.groups })
      ctx.fact("ungrouped", { bClaims: b.ungrouped })
    })
}

const atomic = (
  name: string,
  title: string,
  body: (ctx: Context, w: World) => Effect.Effect<void, unknown>
): Scenario => ({ name, title, run: (ctx) => Effect.flatMap(ctx.world({ maxDelta: 5 }), (w) => body(ctx, w)) })

const atomicEnqueue = atomic("atomic_enqueue", "a trigger rejects the insert into event", (ctx, w) =>
  Effect.gen(function*() {
    yield* enqueueAll(w, [["A1", "A", 1]])
    yield* rejectInserts(path.join(ctx.dir, "queue.db"), "relay_event")
    const error = yield* errorTag(w.queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 1 } }))
    const flows = (yield* w.queue.snapshot).flows.map((f) => `${f.flowId}:${f.seq}`)
    ctx.say(`enqueue A2 → ${error}; flow seqs ${flows.join(" ")}`)
    ctx.check("error", "SqlError", error)
    ctx.check("flow seq unchanged", ["A:1"], flows)
    ctx.fact("flows", flows)
  }))

const atomicReceive = atomic("atomic_receive", "a trigger rejects the projection write", (ctx, w) =>
  Effect.gen(function*() {
    yield* enqueueAll(w, [["A1", "A", 3]])
    yield* rejectInserts(path.join(ctx.dir, "inbox.db"), "counter_total")
    const error = yield* errorTag(w.deliver(yield* w.claim))
    const end = yield* stores(w)
    ctx.say(`receive A1 → ${error}; receipts ${end.receipts.length}; A1 ${end.events[0]!.state}`)
    ctx.check("error", "SqlError", error)
    ctx.check("receipts unchanged", [], end.receipts)
    ctx.fact("stores", end)
  }))

const atomicRedrive = atomic("atomic_redrive", "a trigger rejects the audit insert", (ctx, w) =>
  Effect.gen(function*() {
    yield* enqueueAll(w, [["A1", "A", 10]])
    yield* steps(w, 1)
    yield* rejectInserts(path.join(ctx.dir, "queue.db"), "relay_audit")
    const error = yield* errorTag(w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "fix" }))
    const end = yield* stores(w)
    ctx.say(`redrive A1 → ${error}; A1 ${end.events[0]!.state}, generation ${end.events[0]!.generation}; audit rows ${end.audit.length}`)
    ctx.check("error", "SqlError", error)
    ctx.check("still quarantined", "quarantined", end.events[0]!.state)
    ctx.check("audit rows", 0, end.audit.length)
    ctx.fact("stores", end)
  }))

/** Scenarios that need no extra process, by their number in docs/protocol.md. */
export const protocolScenarios: ReadonlyArray<readonly [number, Scenario]> = [
  [1, roundRobin],
  [2, starvation],
  [4, retryBackoff],
  [5, staleAfterReclaim],
  [6, expiredLease],
  [7, quarantineIsolates],
  [8, redriveAfterFix],
  [9, redriveGuards],
  [10, enqueueIdempotency],
  [11, clockRegression],
  [12, newFlowsOvertake],
  [19, atomicEnqueue],
  [20, atomicReceive],
  [21, atomicRedrive],
  [22, newFlowsTail],
  [23, tenantFairness]
]
