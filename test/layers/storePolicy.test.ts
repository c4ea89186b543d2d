/**
 * A store keeps the protocol it was created with: a process that opens it without protocol
 * settings adopts them; one that asks for different ones is refused before anything runs, and
 * the file is left as it was.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { defaultPolicy, seedPolicy } from "../../src/domain/Policy.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { tempDir } from "../support/backends.js"

const open = (filename: string, policy?: SqliteRelayQueue.SqliteRelayQueueOptions["policy"]) =>
  Effect.scoped(Effect.map(SqliteRelayQueue.make({ filename, policy }), (queue) => queue.policy))

describe("a store keeps its protocol settings", () => {
  it.scoped("the creator's settings are adopted by a process that gives none, with its own per-process options", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir, "queue.db")
      expect(yield* open(file, seedPolicy)).toEqual(seedPolicy)
      expect(yield* open(file)).toEqual({ ...defaultPolicy, leaseTicks: 5, retryBudget: 3, backoffBase: 2, backoffCap: 8, admission: "seed" })
      expect((yield* open(file, { jitter: "full", leaseTicks: 5 })).jitter).toBe("full")
    }))

  it.scoped("a different protocol setting given explicitly is PolicyMismatch naming it, and nothing is written", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir, "queue.db")
      yield* open(file, seedPolicy)
      const before = fs.readFileSync(file)
      const error = yield* Effect.flip(open(file, { admission: "tail", leaseTicks: "1 minute", retryBudget: 3 }))
      expect(error).toMatchObject({ _tag: "PolicyMismatch", settings: ["leaseTicks", "admission"] })
      expect(error.message).toContain("admission")
      expect(fs.readFileSync(file).equals(before)).toBe(true)
    }))

  it.scoped("a store created without a policy keeps the production defaults", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir, "queue.db")
      expect(yield* open(file)).toEqual(defaultPolicy)
      expect(yield* Effect.flip(open(file, seedPolicy))).toMatchObject({ _tag: "PolicyMismatch" })
    }))
})
