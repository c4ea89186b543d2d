/**
 * SQLite prepares a statement again every time it binds a LIMIT that is a bare parameter (`LIMIT ?`)
 * — on every run of it: a claim's grouped walk cost ~6× what it costs with the LIMIT written as an
 * expression (`LIMIT +?`, planned once; `Store.limitTo`). Every statement with a LIMIT that the
 * SQLite stores send — claims (grouped walk), settles, the operator's pages, prune and its dry
 * run, the inbox's prune — is checked here for a bare LIMIT parameter.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Ref } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Counter, SqliteInbox, SqliteRelayQueue } from "../../src/index.js"
import { captureSql } from "../../scenarios/support/captureSql.js"
import { testTmpDir } from "../support/tmp.js"

const bareLimit = /\bLIMIT\s+\?/i

describe("SQLite statements with a LIMIT", () => {
  it.scoped("bind it as an expression, never as a bare parameter", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(testTmpDir(), "fair-relay-limit-"))),
        (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
      )
      // Nothing acked is kept: every acked event and receipt is due for pruning at once.
      const queue = yield* SqliteRelayQueue.make({ filename: path.join(dir, "queue.db"), retention: { acked: 0, dedup: 0 } })
      const inbox = yield* SqliteInbox.make({
        filename: path.join(dir, "inbox.db"),
        business: Counter.business(yield* Ref.make(1_000)),
        retention: { receipts: 0 }
      })
      yield* queue.enqueueBatch(Array.from({ length: 12 }, (_, i) => ({
        eventId: `e${i}`,
        flowId: `f${i % 6}`,
        body: { delta: 1 },
        ...(i % 2 === 0 ? { group: `g${i % 3}` } : {})
      })))
      const [work, statements] = yield* captureSql(Effect.gen(function*() {
        const one = yield* queue.claim
        const many = yield* queue.claimBatch(4)
        const claimed = [...(one._tag === "Claimed" ? [one] : []), ...many]
        for (const { event } of claimed) {
          yield* inbox.receive({ eventId: event.eventId, flowId: event.flowId, seq: event.seq, body: event.body })
        }
        yield* queue.settleBatch(claimed.map(({ token }) => ({ token, reply: { _tag: "Accepted" as const } })))
        yield* queue.events({ limit: 5 })
        yield* queue.flows({ limit: 5 })
        yield* queue.flows({ order: "turn", limit: 5 })
        yield* queue.groups({ limit: 5 })
        yield* queue.audit({ limit: 5 })
        const dryRun = yield* queue.prune({ dryRun: true, limit: 100 })
        const pruned = yield* queue.prune({ limit: 100 })
        const receipts = yield* inbox.prune({ dryRun: true, limit: 100 })
        yield* inbox.prune({ limit: 100 })
        return { claimed: claimed.length, dryRun, pruned, receipts }
      }))
      // The steps ran what they are meant to: claims of grouped flows, and prunes with rows due.
      expect(work.claimed).toBe(5)
      expect(work.dryRun.events).toBe(5)
      expect(work.pruned.events).toBe(5)
      expect(work.receipts.receipts).toBe(5)
      const limited = statements.filter((text) => /\bLIMIT\b/i.test(text))
      // The grouped walk, the pages and the prunes: some dozen statements with a LIMIT.
      expect(limited.length).toBeGreaterThan(10)
      expect(limited.filter((text) => bareLimit.test(text))).toEqual([])
    }))
})
