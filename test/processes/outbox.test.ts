/**
 * The transactional outbox with real OS processes, on each backend: the application's tables and
 * the queue in one database (one SQLite file; one PostgreSQL schema), each process with its own
 * client (scenarios/processes/outboxApp.ts, child outboxChild.ts).
 *
 * - A process is SIGKILLed between its business write + enqueue and the commit: neither the
 *   order nor its event exists afterwards (read with a fresh connection once the killed
 *   transaction is gone), and a restarted process places the same order at seq 1.
 * - Four processes place 25 orders each into three shared flows, a seeded 20 % of the
 *   transactions rolled back after the enqueue; committed ones append to `order_log` after the
 *   enqueue. Every committed order has its one event and every event its order; per flow the
 *   seqs are 1..n and follow the log's (commit) order; a relay then delivers every event, per
 *   flow in seq order, and acks it.
 *
 * The expected orders come from the test's own seeded plan, not from the processes' reports.
 * Starting a tsx child costs about a second and a half of CPU: six per backend.
 */
import { expect, it } from "vitest"
import { childScript, spawnChild, withChildren } from "../../scenarios/processes/spawn.js"
import type { PlacedOrder } from "../../scenarios/processes/outboxChild.js"
import type { PlannedOrder } from "../../scenarios/processes/outboxApp.js"
import { createApp, drainQueue, readApp, transactionOpen } from "../../scenarios/processes/outboxApp.js"
import { prng } from "../../scenarios/support/prng.js"
import { describeBackends } from "./support.js"

const Processes = 4
const OrdersPerProcess = 25
const Flows = ["flow-A", "flow-B", "flow-C"]
const Seed = 20_240_917

/** The seeded plan: per process, its orders, each in a random flow, 20 % rolled back after the enqueue. */
const plan = (): ReadonlyArray<ReadonlyArray<PlannedOrder>> => {
  const random = prng(Seed)
  return Array.from({ length: Processes }, (_, p) =>
    Array.from({ length: OrdersPerProcess }, (_, n) => ({
      orderId: `p${p}-${String(n + 1).padStart(2, "0")}`,
      flowId: Flows[Math.floor(random() * Flows.length)]!,
      rollback: random() < 0.2,
      pauseMillis: Math.floor(random() * 4),
      gapMillis: 1 + Math.floor(random() * 5)
    })))
}

const child = (locator: string, index: number) => spawnChild(childScript("outboxChild.ts"), [locator, String(index)])

/** Polls `condition` every 50 ms for up to `millis`; whether it became true. */
const eventually = async (condition: () => Promise<boolean>, millis = 10_000): Promise<boolean> => {
  const deadline = Date.now() + millis
  for (;;) {
    if (await condition()) return true
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describeBackends("transactional outbox (real processes, the application's database)", (backend) => {
  it("SIGKILL between the business write and the commit stores neither order nor event; a restarted process places the order at seq 1", async () => {
    await backend.withStores(async (stores) => {
      const locator = await stores.create("outbox-crash")
      await createApp(locator)
      const order: PlannedOrder = { orderId: "order-1", flowId: "customer-7", rollback: false, pauseMillis: 0, gapMillis: 0 }

      const doomed = child(locator, 0)
      const holding = await withChildren([doomed], async () => {
        await doomed.expect("ready")
        doomed.send({ cmd: "hold", order })
        const message = await doomed.expect("holding")
        // Inside its open transaction: the order is written and the enqueue answered seq 1.
        expect(message).toMatchObject({ seq: 1, ordersSeen: 1 })
        const backendPid = message.backendPid as number | null
        // The transaction really is open, seen from a fresh connection.
        expect(await transactionOpen(locator, backendPid)).toBe(true)
        doomed.kill()
        expect(await doomed.exit).toEqual({ code: null, signal: "SIGKILL" })
        return { backendPid }
      })

      // Once the killed transaction is gone (SQLite: the write lock is free; PostgreSQL: the
      // backend has ended), nothing of it is stored: no order, no event, not even its flow.
      expect(await eventually(async () => !(await transactionOpen(locator, holding.backendPid)))).toBe(true)
      const after = await readApp(locator)
      expect(after.orders).toEqual([])
      expect(after.log).toEqual([])
      expect(after.queue.events).toEqual([])
      expect(after.queue.flows).toEqual([])

      // A restarted process places the same order: its event takes seq 1, no gap.
      const restarted = child(locator, 1)
      const placed = await withChildren([restarted], async () => {
        await restarted.expect("ready")
        restarted.send({ cmd: "place", orders: [order] })
        const message = await restarted.expect("placed")
        restarted.end()
        expect(await restarted.exit).toEqual({ code: 0, signal: null })
        return message.results as ReadonlyArray<PlacedOrder>
      })
      expect(placed).toEqual([{ orderId: "order-1", outcome: "committed", seq: 1 }])
      const final = await readApp(locator)
      expect(final.orders).toEqual([{ id: "order-1", flowId: "customer-7", process: 1 }])
      expect(final.log.map((row) => row.orderId)).toEqual(["order-1"])
      expect(final.queue.events.map((e) => [e.eventId, e.flowId, e.seq, e.state])).toEqual([["order-1:created", "customer-7", 1, "ready"]])
    })
  }, 60_000)

  it(`${Processes} processes × ${OrdersPerProcess} orders into ${Flows.length} shared flows, 20 % rolled back: one event per committed order, seqs 1..n in commit order, all delivered in order`, async () => {
    const orders = plan()
    const all = orders.flat()
    const committed = all.filter((o) => !o.rollback)
    const rolledBack = all.filter((o) => o.rollback)
    // The plan itself: rollbacks happen, and every flow gets committed orders.
    expect(rolledBack.length).toBeGreaterThan(all.length / 10)
    for (const flowId of Flows) expect(committed.filter((o) => o.flowId === flowId).length).toBeGreaterThan(5)

    await backend.withStores(async (stores) => {
      const locator = await stores.create("outbox-writers")
      await createApp(locator)
      const children = Array.from({ length: Processes }, (_, index) => child(locator, index))
      const reports = await withChildren(children, async () => {
        await Promise.all(children.map((c) => c.expect("ready")))
        children.forEach((c, index) => c.send({ cmd: "place", orders: orders[index] }))
        const messages = await Promise.all(children.map((c) => c.expect("placed")))
        for (const c of children) c.end()
        expect((await Promise.all(children.map((c) => c.exit))).map((e) => e.code)).toEqual(children.map(() => 0))
        return messages.map((m) => m.results as ReadonlyArray<PlacedOrder>)
      })

      // Each process did what it was told: no transaction failed, and every enqueue (also in the
      // rolled-back transactions) answered a seq.
      reports.forEach((results, p) => {
        expect(results.filter((r) => r.outcome === "failed"), `process ${p}: failed transactions`).toEqual([])
        expect(results.map((r) => [r.orderId, r.outcome])).toEqual(orders[p]!.map((o) => [o.orderId, o.rollback ? "rolledBack" : "committed"]))
        for (const r of results) expect(r.seq).toBeGreaterThanOrEqual(1)
      })

      const state = await readApp(locator)
      const planned = new Map(all.map((o) => [o.orderId, o]))
      const processOf = (orderId: string) => Number(orderId.slice(1, orderId.indexOf("-")))
      // Every committed order, and only those, with its flow and process.
      expect(state.orders).toEqual(
        committed.map((o) => ({ id: o.orderId, flowId: o.flowId, process: processOf(o.orderId) })).sort((a, b) => (a.id < b.id ? -1 : 1))
      )
      // Every committed order has exactly its one event, in its flow; every event its order.
      const events = state.queue.events
      expect(events.map((e) => e.eventId).sort()).toEqual(committed.map((o) => `${o.orderId}:created`).sort())
      for (const e of events) {
        const orderId = e.eventId.replace(/:created$/, "")
        expect(e.flowId).toBe(planned.get(orderId)?.flowId)
        expect(e.body).toEqual({ orderId })
      }
      // One log row per committed order.
      expect(state.log.map((row) => row.orderId).sort()).toEqual(committed.map((o) => o.orderId).sort())

      const reported = new Map(reports.flat().map((r) => [r.orderId, r.seq]))
      for (const flowId of Flows) {
        const inFlow = events.filter((e) => e.flowId === flowId).sort((a, b) => a.seq - b.seq)
        const n = committed.filter((o) => o.flowId === flowId).length
        // Gap-free: seqs 1..n, although rolled-back transactions had taken seqs too.
        expect(inFlow.map((e) => e.seq), flowId).toEqual(Array.from({ length: n }, (_, i) => i + 1))
        // Seq order is the commit order: the order of the flow's log ids.
        const logOrder = state.log.filter((row) => row.flowId === flowId).map((row) => `${row.orderId}:created`)
        expect(inFlow.map((e) => e.eventId), flowId).toEqual(logOrder)
        // The seq each committed enqueue answered is the one stored.
        for (const e of inFlow) expect(reported.get(e.eventId.replace(/:created$/, "")), e.eventId).toBe(e.seq)
      }
      // The processes really raced: the commit log interleaves them.
      const switches = state.log.filter((row, i) => i > 0 && processOf(row.orderId) !== processOf(state.log[i - 1]!.orderId)).length
      expect(switches, "process switches in the commit log").toBeGreaterThan(Processes)

      // The relay: every event delivered once, per flow in seq order (= commit order), and acked.
      const { deliveries, idleAtEnd, stats } = await drainQueue(locator, committed.length + 10)
      expect(deliveries).toHaveLength(committed.length)
      for (const d of deliveries) expect(d.outcome, d.eventId).toBe("Acked")
      for (const flowId of Flows) {
        const delivered = deliveries.filter((d) => d.flowId === flowId)
        expect(delivered.map((d) => d.seq), flowId).toEqual(delivered.map((_, i) => i + 1))
        expect(delivered.map((d) => d.eventId), flowId).toEqual(
          state.log.filter((row) => row.flowId === flowId).map((row) => `${row.orderId}:created`)
        )
      }
      expect(idleAtEnd).toBe(true)
      expect(stats.byState).toEqual({ ready: 0, inflight: 0, acked: committed.length, quarantined: 0, discarded: 0 })
    })
  }, 90_000)
})
