/**
 * A PostgreSQL restart in the middle of a run, as the relay sees one: every connection of its
 * processes cut at once — transactions in flight, a COMMIT whose outcome the client never learns
 * — new connections refused for a while, then accepted again. The suite's other tests share the
 * server, so this test does not restart it: the relay's queue, its receiver and a producer reach
 * the server through a TCP proxy in this process, which the test stops (cutting every connection,
 * refusing new ones) and starts again on the same port, twice, while the worker daemon drains and
 * the producer enqueues.
 *
 * What it proves: the relay rides out the restart with nothing lost, nothing applied twice and
 * every flow in order; an enqueue retried after a cut commit is `Existing`, not a second event.
 * What it does not: the server's own recovery (a crash's WAL replay keeps what it acknowledged —
 * PostgreSQL's promise); `npm run chaos -- --pg --restarts N` restarts a real server.
 */
import { it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Ref, Schedule } from "effect"
import * as net from "node:net"
import { expect } from "vitest"
import * as PgInbox from "../../src/layers/PgInbox.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import { Relay } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { Transport } from "../../src/services/Transport.js"
import { freshSchema } from "../support/backends.js"
import { captureLogs } from "../support/logs.js"
import { describePg } from "./support.js"

/** A TCP proxy to `target` that can be stopped — every connection cut, new ones refused — and started again. */
const makeProxy = (target: { readonly host: string; readonly port: number }) => {
  const sockets = new Set<net.Socket>()
  let server: net.Server | undefined
  let port = 0
  const start = () =>
    new Promise<void>((resolve, reject) => {
      const listening = net.createServer((client) => {
        const upstream = net.connect(target.port, target.host)
        const pair = [client, upstream]
        for (const socket of pair) {
          sockets.add(socket)
          socket.on("error", () => pair.forEach((s) => s.destroy()))
          socket.on("close", () => {
            sockets.delete(socket)
            pair.forEach((s) => s.destroy())
          })
        }
        client.pipe(upstream)
        upstream.pipe(client)
      })
      listening.once("error", reject)
      // The same port each time: the clients' URL names it.
      listening.listen(port, "127.0.0.1", () => {
        port = (listening.address() as net.AddressInfo).port
        server = listening
        resolve()
      })
    })
  /** Cuts every connection and stops listening; answers how many client connections it cut. */
  const stop = () =>
    new Promise<number>((resolve) => {
      const cut = sockets.size / 2
      for (const socket of sockets) socket.destroy()
      sockets.clear()
      const stopping = server
      server = undefined
      if (stopping === undefined) resolve(cut)
      else stopping.close(() => resolve(cut))
    })
  return { start, stop, port: () => port }
}

const Flows = 8
const PerFlow = 24
const idOf = (flow: number, seq: number) => `F${flow}-${seq}`
const deltaOf = (flow: number, seq: number) => flow + seq

describePg("PostgreSQL restarted mid-run (every connection cut, new ones refused, then accepted)", (url) => {
  for (const claims of ["exact", "parallel"] as const) {
    it.scopedLive(`${claims} claims: the worker daemon and a producer ride out two restarts: every event once, every flow in order`, () =>
      Effect.gen(function*() {
        const queueSchema = yield* freshSchema(url)
        const inboxSchema = yield* freshSchema(url)
        const server = new URL(url)
        const proxy = makeProxy({ host: server.hostname, port: Number(server.port || 5432) })
        yield* Effect.acquireRelease(Effect.promise(proxy.start), () => Effect.promise(proxy.stop))
        const proxied = (schemaUrl: string) => {
          const through = new URL(schemaUrl)
          through.hostname = "127.0.0.1"
          through.port = String(proxy.port())
          return through.toString()
        }
        // A short lease and quick backoffs: heads held by a cut step come back within two seconds,
        // and the retries a cut delivery costs never spend the budget.
        const policy = { leaseTicks: "2 seconds", backoffBase: "10 millis", backoffCap: "100 millis", retryBudget: 1_000 } as const
        const maxDelta = yield* Ref.make(1_000_000)

        // Reached directly, not through the proxy: the test's own view of the stores.
        const queue = yield* PgRelayQueue.make({ url: queueSchema.url, policy, claims, maxConnections: 2 })
        const inbox = yield* PgInbox.make({ url: inboxSchema.url, business: Counter.business(maxDelta), maxConnections: 1 })

        const captured = captureLogs()
        const context = yield* Layer.build(
          Relay.layer.pipe(
            Layer.provideMerge(Transport.layerInbox),
            Layer.provideMerge(PgInbox.layer({ url: proxied(inboxSchema.url), business: Counter.business(maxDelta), maxConnections: 4 })),
            Layer.provideMerge(PgRelayQueue.layer({ url: proxied(queueSchema.url), policy, claims, maxConnections: 4 }))
          )
        )

        // Half the events are there before the run; a producer enqueues the rest through the
        // proxy, retrying each enqueue that failed (it may have committed: then it is Existing).
        const first = Math.floor(PerFlow / 2)
        for (let seq = 1; seq <= first; seq++) {
          for (let flow = 0; flow < Flows; flow++) {
            yield* queue.enqueue({ eventId: idOf(flow, seq), flowId: `F${flow}`, body: { delta: deltaOf(flow, seq) } })
          }
        }
        const enqueueRetries = yield* Ref.make(0)
        const producer = Effect.gen(function*() {
          const proxiedQueue = yield* RelayQueue
          for (let seq = first + 1; seq <= PerFlow; seq++) {
            for (let flow = 0; flow < Flows; flow++) {
              yield* proxiedQueue.enqueue({ eventId: idOf(flow, seq), flowId: `F${flow}`, body: { delta: deltaOf(flow, seq) } }).pipe(
                Effect.tapErrorTag("SqlError", () => Ref.update(enqueueRetries, (n) => n + 1)),
                Effect.retry({ while: (error) => error._tag === "SqlError", schedule: Schedule.spaced(Duration.millis(20)) })
              )
            }
            yield* Effect.sleep(Duration.millis(15))
          }
        }).pipe(Effect.provide(context))

        const relay = Effect.flatMap(Relay, (r) => r.run({ workers: 4, pollInterval: "50 millis", deliveryTimeout: "1 second", metricsInterval: null, pruneInterval: null }))
        const running = yield* Effect.fork(relay.pipe(Effect.provide(context), Effect.provide(captured.layer)))
        const producing = yield* Effect.fork(producer)

        const total = Flows * PerFlow
        const acked = Effect.map(queue.stats, (stats) => stats.byState.acked)
        const until = (enough: (n: number) => boolean) =>
          acked.pipe(
            Effect.filterOrFail(enough, (n) => `only ${n} acked`),
            Effect.retry(Schedule.spaced(Duration.millis(20))),
            Effect.timeoutFail({ duration: Duration.seconds(40), onTimeout: () => "the run did not finish" }),
            // A relay that stopped (a bad option, a defect) fails the test at once.
            Effect.raceFirst(Effect.zipRight(Fiber.join(running), Effect.fail("the relay stopped")))
          )
        const cuts: Array<number> = []
        for (const at of [Math.floor(total / 3), Math.floor((2 * total) / 3)]) {
          yield* until((n) => n >= at)
          cuts.push(yield* Effect.promise(proxy.stop))
          // The server is "down": every connection attempt is refused.
          yield* Effect.sleep(Duration.millis(400))
          yield* Effect.promise(proxy.start)
        }
        yield* Fiber.join(producing)
        yield* until((n) => n === total)
        yield* Fiber.interrupt(running)

        // Each restart cut connections the relay had open.
        expect(cuts.every((n) => n > 0), `connections cut: ${cuts.join(", ")}`).toBe(true)
        const failures = captured.logs.filter((log) => log.message.startsWith("relay step failed") || log.message.startsWith("delivery got no reply"))
        console.log(
          `${claims}: connections cut ${cuts.join(" + ")}, failed steps or deliveries ${failures.length}, enqueue retries ${yield* Ref.get(enqueueRetries)}`
        )

        // One event per id at its place in its flow, every one acked.
        const snapshot = yield* queue.snapshot
        expect(snapshot.events).toHaveLength(total)
        for (const event of snapshot.events) {
          const [flow, seq] = event.eventId.slice(1).split("-").map(Number)
          expect([event.flowId, event.seq, event.state]).toEqual([`F${flow}`, seq, "acked"])
        }
        // One receipt and one effect per event, every flow applied through its last seq.
        const receipts = yield* inbox.receipts
        expect(receipts).toHaveLength(total)
        expect(new Set(receipts.map((r) => r.eventId)).size).toBe(total)
        const flows = Array.from({ length: Flows }, (_, flow) => flow)
        expect(yield* inbox.progress).toEqual(new Map(flows.map((flow) => [`F${flow}`, PerFlow])))
        const expectedTotals = flows.map((flow): [string, number] => {
          let sum = 0
          for (let seq = 1; seq <= PerFlow; seq++) sum += deltaOf(flow, seq)
          return [`F${flow}`, sum]
        })
        expect(yield* inbox.read(Counter.totals)).toEqual(new Map(expectedTotals))
      }), 60_000)
  }
})
