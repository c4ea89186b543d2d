/**
 * Store files for the reliability tests: a template pair (queue + receiver) holding every kind
 * of state, copied fresh for each case, and byte-level comparison of a directory's files.
 */
import { seedPolicy } from "../../../src/domain/Policy.js"
import Database from "better-sqlite3"
import { Effect, Ref } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Counter from "../../../src/sample/Counter.js"
import * as SqliteInbox from "../../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../../src/layers/SqliteRelayQueue.js"
import type { InboxService } from "../../../src/services/Inbox.js"
import type { RelayQueueService } from "../../../src/services/RelayQueue.js"
import * as TickClock from "../../../src/services/TickClock.js"
import { testTmpDir } from "../../support/tmp.js"

/** The tick at which the template was written; cases run at the same tick. */
export const TemplateTick = 10

/** Every file of `dir` (the -wal and -shm files included, when present) by name. */
export const filesOf = (dir: string): Map<string, Buffer> =>
  new Map(fs.readdirSync(dir).sort().map((name) => [name, fs.readFileSync(path.join(dir, name))]))

/** Names of the files that differ between two readings of a directory (added, removed, changed). */
export const changedFiles = (before: Map<string, Buffer>, after: Map<string, Buffer>): Array<string> => {
  const names = new Set([...before.keys(), ...after.keys()])
  return [...names].filter((name) => {
    const a = before.get(name)
    const b = after.get(name)
    return a === undefined || b === undefined || !a.equals(b)
  }).sort()
}

export const makeDir = (prefix: string): string => fs.mkdtempSync(path.join(testTmpDir(), `fair-relay-${prefix}-`))

/** Store files of one case. */
export interface Files {
  readonly dir: string
  readonly queue: string
  readonly inbox: string
}

export const filesIn = (dir: string): Files => ({ dir, queue: path.join(dir, "queue.db"), inbox: path.join(dir, "inbox.db") })

/** The counter receiver with a delta limit of 5, as in the seed's redrive scenario. */
export const inboxBusiness = () => Counter.business(Ref.unsafeMake(5))

/** Opens the queue and the receiver of `files` for the scope (the caller provides the clock). */
export const openStores = (files: Files, busyTimeoutMillis?: number): Effect.Effect<{ queue: RelayQueueService; inbox: InboxService }, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const queue = yield* SqliteRelayQueue.make({
      filename: files.queue,
      policy: seedPolicy,
      ...(busyTimeoutMillis === undefined ? {} : { busyTimeoutMillis })
    })
    const inbox = yield* SqliteInbox.make({
      filename: files.inbox,
      business: inboxBusiness(),
      ...(busyTimeoutMillis === undefined ? {} : { busyTimeoutMillis })
    })
    return { queue, inbox }
  })

/**
 * Writes a template at tick `TemplateTick`: A1 acked (with its receipt and effect), A2 ready, B1
 * quarantined by the receiver's refusal (delta 10 over the limit 5; generation 1), C1 in flight
 * (generation 1, lease until tick 15), C2 ready behind it. The stores are closed afterwards.
 */
export const writeTemplate = (files: Files): Promise<void> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const { inbox, queue } = yield* openStores(files)
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        yield* queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 2 } })
        yield* queue.enqueue({ eventId: "B1", flowId: "B", body: { delta: 10 } })
        yield* queue.enqueue({ eventId: "C1", flowId: "C", body: { delta: 3 } })
        yield* queue.enqueue({ eventId: "C2", flowId: "C", body: { delta: 4 } })
        for (const expected of ["A1", "B1"]) {
          const claimed = yield* queue.claim
          if (claimed._tag !== "Claimed" || claimed.event.eventId !== expected) {
            return yield* Effect.dieMessage(`template: expected to claim ${expected}, got ${JSON.stringify(claimed)}`)
          }
          const reply = yield* inbox.receive({
            eventId: claimed.event.eventId,
            flowId: claimed.event.flowId,
            seq: claimed.event.seq,
            body: claimed.event.body
          })
          yield* queue.settle(claimed.token, reply)
        }
        // C (served 0) comes before A (served 1): C1 is claimed and left in flight.
        const c1 = yield* queue.claim
        if (c1._tag !== "Claimed" || c1.event.eventId !== "C1") {
          return yield* Effect.dieMessage(`template: expected C1, got ${JSON.stringify(c1)}`)
        }
      })
    ).pipe(TickClock.at(TemplateTick))
  )

/** Copies the template files into a fresh directory. */
export const copyTemplate = (template: Files, prefix: string): Files => {
  const dir = makeDir(prefix)
  for (const name of fs.readdirSync(template.dir)) fs.copyFileSync(path.join(template.dir, name), path.join(dir, name))
  return filesIn(dir)
}

/** Runs a statement on a closed store file (e.g. to install a trigger), then closes it again. */
export const execOn = (file: string, statement: string): void => {
  const db = new Database(file, { fileMustExist: true })
  try {
    db.exec(statement)
  } finally {
    db.close()
  }
}

/** The highest migration id recorded in `table` of a store file. */
export const latestMigration = (file: string, table: string): number => {
  const db = new Database(file, { fileMustExist: true, readonly: true })
  try {
    return (db.prepare(`SELECT MAX(migration_id) AS id FROM ${table}`).get() as { id: number }).id
  } finally {
    db.close()
  }
}
