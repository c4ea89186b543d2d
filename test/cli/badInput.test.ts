/**
 * Bad input to the real bin: a missing file, a file that is not a fair-relay store, malformed
 * JSON, a flow's group changed, an unknown event, a wrong generation, a blank reason, a command
 * line that cannot work.
 * Each must print one line on stderr, exit non-zero (1: the store or operation refused; 2: usage),
 * print nothing on stdout, and leave the store file byte-for-byte as it was (a missing file stays
 * missing, and no other file appears next to it).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { bin, execOn, lines, otherApplication, Parallel, pool, quarantinedStore, tablesOf, tempDir } from "./support.js"

const root = tempDir("bad-input")
const template = path.join(root, "template.db")

beforeAll(() => quarantinedStore(template))
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

/** SQLite's side files of a WAL store: a read-only open may leave empty ones; they are not the store. */
const isSideFile = (name: string) => name.endsWith("-wal") || name.endsWith("-shm")

interface Case {
  readonly what: string
  /** Puts the store in `dir` (or not) and returns its path. */
  readonly prepare: (dir: string) => string
  readonly args: (db: string, dir: string) => ReadonlyArray<string>
  readonly code: 1 | 2
  /** The one line on stderr. */
  readonly stderr: RegExp
}

const copy = (dir: string) => {
  const file = path.join(dir, "queue.db")
  fs.copyFileSync(template, file)
  return file
}
const missing = (dir: string) => path.join(dir, "queue.db")
const text = (dir: string) => {
  const file = path.join(dir, "queue.db")
  fs.writeFileSync(file, "this is not a database\n".repeat(50))
  return file
}
const foreign = (dir: string) => {
  const file = path.join(dir, "app.db")
  otherApplication(file)
  return file
}
const newer = (dir: string) => {
  const file = copy(dir)
  execOn(file, "INSERT INTO relay_migrations (migration_id, name) VALUES (999, 'from_a_newer_release')")
  return file
}

const redriveA1 = (db: string) => ["redrive", "A1", "--db", db, "--generation", "1", "--reason", "limit raised", "--by", "bob"]

const cases: ReadonlyArray<Case> = [
  {
    what: "status on a missing file",
    prepare: missing,
    args: (db) => ["status", "--db", db],
    code: 1,
    stderr: /^fair-relay: no queue store at ".*queue\.db": the file does not exist \(StoreNotFound\)$/
  },
  {
    what: "redrive on a missing file",
    prepare: missing,
    args: redriveA1,
    code: 1,
    stderr: /\(StoreNotFound\)$/
  },
  {
    what: "enqueue on a missing file without --create",
    prepare: missing,
    args: (db) => ["enqueue", "--db", db, "--flow", "A", "--id", "A1", "--body", "{}"],
    code: 1,
    stderr: /\(StoreNotFound\)$/
  },
  {
    what: "run on a missing file (no receiver file is created either)",
    prepare: missing,
    args: (db, dir) => ["run", "--db", db, "--inbox", path.join(dir, "inbox.db"), "--until-idle"],
    code: 1,
    stderr: /\(StoreNotFound\)$/
  },
  {
    what: "status on a text file",
    prepare: text,
    args: (db) => ["status", "--db", db],
    code: 1,
    stderr: /^fair-relay: ".*queue\.db" is not a SQLite database, so not a fair-relay queue store \(NotAQueueStore\)$/
  },
  {
    what: "redrive on a text file",
    prepare: text,
    args: redriveA1,
    code: 1,
    stderr: /\(NotAQueueStore\)$/
  },
  {
    what: "events on another application's SQLite database",
    prepare: foreign,
    args: (db) => ["events", "--db", db],
    code: 1,
    stderr: /^fair-relay: ".*app\.db" is a SQLite database but not a fair-relay queue store .*\(NotAQueueStore\)$/
  },
  {
    what: "enqueue --create on another application's SQLite database",
    prepare: foreign,
    args: (db) => ["enqueue", "--db", db, "--create", "--flow", "A", "--id", "A1", "--body", "{}"],
    code: 1,
    stderr: /\(NotAQueueStore\)$/
  },
  {
    what: "redrive on a store written by a newer fair-relay",
    prepare: newer,
    args: redriveA1,
    code: 1,
    stderr: /^fair-relay: ".*queue\.db" was written by a newer fair-relay \(queue schema 999; .*\(UnsupportedSchema\)$/
  },
  {
    what: "enqueue with a malformed JSON body",
    prepare: copy,
    args: (db) => ["enqueue", "--db", db, "--flow", "A", "--id", "A9", "--body", "{delta: 1"],
    code: 2,
    stderr: /^--body: not valid JSON \(.*\)$/
  },
  {
    what: "enqueue naming a group for a flow whose first event named none",
    prepare: copy,
    args: (db) => ["enqueue", "--db", db, "--flow", "A", "--id", "A9", "--group", "acme", "--body", "{}"],
    code: 1,
    stderr: /^fair-relay: flow "A" belongs to no group, not "acme": a flow's group is fixed by its first event \(GroupConflict\)$/
  },
  {
    what: "redrive of an unknown event",
    prepare: copy,
    args: (db) => ["redrive", "ZZ", "--db", db, "--generation", "1", "--reason", "limit raised"],
    code: 1,
    stderr: /^fair-relay: no event with id "ZZ" \(EventNotFound\)$/
  },
  {
    what: "show of an unknown event",
    prepare: copy,
    args: (db) => ["show", "ZZ", "--db", db],
    code: 1,
    stderr: /^fair-relay: no event with id "ZZ" \(EventNotFound\)$/
  },
  {
    what: "redrive with the wrong generation",
    prepare: copy,
    args: (db) => ["redrive", "A1", "--db", db, "--generation", "2", "--reason", "limit raised"],
    code: 1,
    stderr: /^fair-relay: event "A1" is at generation 1, not 2 \(GenerationMismatch\)$/
  },
  {
    what: "redrive with a blank reason",
    prepare: copy,
    args: (db) => ["redrive", "A1", "--db", db, "--generation", "1", "--reason", "   "],
    code: 2,
    stderr: /^fair-relay: redrive of "A1" needs a non-blank reason \(MissingReason\)$/
  },
  {
    what: "redrive of an event that is not quarantined",
    prepare: copy,
    args: (db) => ["redrive", "B1", "--db", db, "--generation", "0", "--reason", "limit raised"],
    code: 1,
    stderr: /^fair-relay: event "B1" is ready, not quarantined \(NotQuarantined\)$/
  },
  {
    what: "redrive without --generation",
    prepare: copy,
    args: (db) => ["redrive", "A1", "--db", db, "--reason", "limit raised"],
    code: 2,
    stderr: /^Expected to find option: '--generation'$/
  },
  {
    what: "a command without --db or FAIR_RELAY_DB",
    prepare: copy,
    args: () => ["status"],
    code: 2,
    stderr: /^fair-relay: no queue store given: pass --db DB or set FAIR_RELAY_DB \(NoStore\)$/
  }
]

describe("bad input: one line on stderr, a non-zero exit, the file unchanged", () => {
  it("refuses every case and leaves every file as it was", async () => {
    const outcomes = await pool(Parallel, cases.map((c, i) => async () => {
      const dir = path.join(root, `case-${i}`)
      fs.mkdirSync(dir)
      const db = c.prepare(dir)
      const before = fs.existsSync(db) ? fs.readFileSync(db) : undefined
      const listing = fs.readdirSync(dir).sort()
      const ran = await bin(c.args(db, dir))
      return { c, dir, db, before, listing, ran }
    }))
    for (const { before, c, db, dir, listing, ran } of outcomes) {
      const context = `${c.what}\nstdout: ${ran.stdout}\nstderr: ${ran.stderr}`
      expect(ran.code, context).toBe(c.code)
      expect(lines(ran.stderr), context).toHaveLength(1)
      expect(lines(ran.stderr)[0], context).toMatch(c.stderr)
      expect(ran.stdout, context).toBe("")
      if (before === undefined) {
        expect(fs.existsSync(db), `${c.what}: the missing file was created`).toBe(false)
      } else {
        expect(fs.readFileSync(db).equals(before), `${c.what}: the file changed`).toBe(true)
      }
      expect(fs.readdirSync(dir).filter((name) => !isSideFile(name)).sort(), `${c.what}: files appeared`).toEqual(
        listing.filter((name) => !isSideFile(name))
      )
    }
    // Not a WAL store: the refused opens left no side file at all, and no fair-relay table.
    const foreignCases = outcomes.filter((o) => o.c.prepare === foreign || o.c.prepare === text || o.c.prepare === missing)
    for (const { c, dir, listing } of foreignCases) expect(fs.readdirSync(dir).sort(), c.what).toEqual(listing)
    for (const { c, db } of outcomes.filter((o) => o.c.prepare === foreign)) expect(tablesOf(db), c.what).toEqual(["customers"])
  }, 180_000)
})
