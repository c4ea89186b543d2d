/**
 * A store's `-wal` file holds committed writes until a checkpoint, so the docs must never make it
 * (or `-shm`) sound disposable while the store is open. The behaviour is shown on a real store:
 * an acknowledged enqueue is in `queue.db` + `queue.db-wal`, and not in `queue.db` alone.
 */
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { tempDir } from "../support/backends.js"

const root = fileURLToPath(new URL("../../", import.meta.url))
const docs = ["README.md", ...fs.readdirSync(path.join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)]

/** Events in a copy of the store made of `files` (the main file, and the -wal or not). */
const eventsInCopy = (dir: string, files: ReadonlyArray<string>): number | string => {
  const copy = fs.mkdtempSync(path.join(dir, "copy-"))
  for (const file of files) fs.copyFileSync(path.join(dir, file), path.join(copy, file))
  const db = new Database(path.join(copy, "queue.db"))
  try {
    return (db.prepare("SELECT count(*) AS n FROM relay_event").get() as { n: number }).n
  } catch (error) {
    return String((error as Error).message)
  } finally {
    db.close()
  }
}

describe("a store's -wal and -shm files", () => {
  it.scoped("an acknowledged enqueue lives in -wal while the store is open: the main file alone lacks it", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const queue = yield* SqliteRelayQueue.make({ filename: path.join(dir, "queue.db") })
      expect(yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })).toEqual({ _tag: "Enqueued", seq: 1 })
      expect(fs.statSync(path.join(dir, "queue.db-wal")).size).toBeGreaterThan(0)
      expect(eventsInCopy(dir, ["queue.db", "queue.db-wal"])).toBe(1)
      expect(eventsInCopy(dir, ["queue.db"])).not.toBe(1)
    }))

  it("the README says never to delete them while the store is open", () => {
    const readme = fs.readFileSync(path.join(root, "README.md"), "utf8").replace(/\s+/g, " ")
    expect(readme.includes("A store is its file and its `-wal` and `-shm` files."), "README: the store's files").toBe(true)
    const never = /never delete, move or restore those two files .{0,40} while any process has the store open/
    expect(never.test(readme), "README: never delete them while the store is open").toBe(true)
  })

  it("no doc calls them empty or says something other than SQLite removes them", () => {
    for (const doc of docs) {
      const text = fs.readFileSync(path.join(root, doc), "utf8").replace(/\s+/g, " ")
      expect(/empty `-wal`|next writer removes them|(delete|remove|rm) [^.]{0,40}-wal/i.exec(text)?.[0], doc).toBeUndefined()
    }
  })
})
