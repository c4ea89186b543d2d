/**
 * End to end: 3 worker processes over one SQLite queue file deliver 20 flows × 50 events over
 * HTTP (a real loopback socket) to a receiver that answers Retry or Gap 20% of the time before
 * touching its store. Everything is acked, each flow is applied in order, no effect twice.
 */
import { HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Random, Ref } from "effect"
import { createServer } from "node:http"
import * as path from "node:path"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import * as HttpInbox from "../../src/http/HttpInbox.js"
import * as HttpTransport from "../../src/http/HttpTransport.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import { Inbox } from "../../src/services/Inbox.js"
import { e2ePolicy, e2eSecret, withHttpWorkers } from "../../scenarios/processes/httpWorkers.js"
import { tempDir } from "../support/backends.js"

const Flows = 20
const Events = 50

/** A fair-relay reply, answered in its media type so the transport reads the decision. */
const reply = (document: DeliveryReply) =>
  HttpServerResponse.text(JSON.stringify(document), { contentType: HttpTransport.ReplyMediaType })

/** The receiver: 10% Retry, 10% synthetic Gap, the rest through the real handler and inbox. */
const flaky = (answered: Ref.Ref<{ retry: number; gap: number }>, handler: HttpInbox.Handler) =>
  Effect.gen(function*() {
    const roll = yield* Random.next
    if (roll < 0.1) {
      yield* Ref.update(answered, (n) => ({ ...n, retry: n.retry + 1 }))
      return reply({ _tag: "Retry", reason: "unavailable" })
    }
    if (roll < 0.2) {
      yield* Ref.update(answered, (n) => ({ ...n, gap: n.gap + 1 }))
      return reply({ _tag: "Gap", expected: 1 })
    }
    return yield* handler
  })

describe("three worker processes over HTTP", () => {
  it.scopedLive("20 flows × 50 events: all acked, per-flow order at the receiver, one effect each", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const queueFile = path.join(dir, "queue.db")
      const queue = yield* SqliteRelayQueue.make({ filename: queueFile, policy: e2ePolicy })
      const inputs = Array.from({ length: Flows * Events }, (_, i) => {
        const flow = i % Flows
        const n = Math.floor(i / Flows) + 1
        return { eventId: `f${flow}-${n}`, flowId: `f${flow}`, body: { delta: n } }
      })
      yield* queue.enqueueBatch(inputs)

      const answered = yield* Ref.make({ retry: 0, gap: 0 })
      const maxDelta = yield* Ref.make(1000)
      const context = yield* Layer.build(
        HttpServer.serve(flaky(answered, yield* HttpInbox.makeHandler({ secrets: e2eSecret }))).pipe(
          Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })),
          Layer.provideMerge(SqliteInbox.layer({ filename: path.join(dir, "inbox.db"), business: Counter.business(maxDelta) }))
        )
      )
      const url = yield* HttpInbox.url.pipe(Effect.provide(context))
      const inbox = yield* Effect.provide(Inbox, context)

      const allAcked = Effect.map(queue.stats, (s) => s.byState.acked === Flows * Events)
      const { exitCodes } = yield* Effect.promise(() =>
        withHttpWorkers({ queueFile, url, processes: 3, workers: 2 }, () =>
          Effect.runPromise(
            Effect.gen(function*() {
              for (let i = 0; i < 1200 && !(yield* allAcked); i++) yield* Effect.sleep("100 millis")
            })
          ))
      )
      expect(exitCodes).toEqual([0, 0, 0])

      const stats = yield* queue.stats
      expect(stats.byState).toEqual({ ready: 0, inflight: 0, acked: Flows * Events, quarantined: 0, discarded: 0 })
      const receipts = yield* inbox.receipts
      expect(receipts).toHaveLength(Flows * Events)
      expect(new Set(receipts.map((r) => r.eventId)).size).toBe(Flows * Events)
      for (let flow = 0; flow < Flows; flow++) {
        expect(receipts.filter((r) => r.flowId === `f${flow}`).map((r) => r.seq)).toEqual(
          Array.from({ length: Events }, (_, i) => i + 1)
        )
      }
      const totals = yield* inbox.read(Counter.totals)
      expect([...totals.values()]).toEqual(Array.from({ length: Flows }, () => (Events * (Events + 1)) / 2))
      // The flaky answers really happened, and were retried rather than acked.
      const flakes = yield* Ref.get(answered)
      expect(flakes.retry).toBeGreaterThan(0)
      expect(flakes.gap).toBeGreaterThan(0)
      const snapshot = yield* queue.snapshot
      expect(snapshot.events.reduce((n, e) => n + e.lifetimeAttempts, 0)).toBeGreaterThanOrEqual(Flows * Events + flakes.retry + flakes.gap)
    }), 150_000)
})
