/**
 * The raw durable-commit ceiling of this disk: a loop of `BEGIN IMMEDIATE; UPDATE …; COMMIT`
 * through better-sqlite3 directly, WAL + `synchronous=FULL` (the library's settings), no Effect.
 * Shared disks drift, so drains also take short bursts of it *between their own steps*
 * (`Ceiling.burst`), giving a ceiling measured in the same minutes as the drain.
 */
import Database from "better-sqlite3"
import { freshWorkFile, removeDb } from "./stores.js"

export interface CeilingResult {
  readonly commits: number
  readonly seconds: number
  readonly commitsPerSecond: number
  readonly meanCommitMs: number
}

export const ceilingResult = (commits: number, seconds: number): CeilingResult => ({
  commits,
  seconds,
  commitsPerSecond: commits / seconds,
  meanCommitMs: (seconds * 1000) / Math.max(1, commits)
})

/** An open ceiling database: commit bursts accumulate into one figure. */
export interface Ceiling {
  /** Commits for `ms` milliseconds. */
  readonly burst: (ms: number) => void
  /** Everything committed so far. */
  readonly result: () => CeilingResult
  readonly close: () => void
}

export const openCeiling = (name = "ceiling.db"): Ceiling => {
  const file = freshWorkFile(name)
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = FULL")
  db.exec("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
  db.exec("INSERT INTO counter (id, n) VALUES (1, 0)")
  const begin = db.prepare("BEGIN IMMEDIATE")
  const update = db.prepare("UPDATE counter SET n = n + 1 WHERE id = 1")
  const commit = db.prepare("COMMIT")
  let commits = 0
  let elapsedMs = 0
  return {
    burst: (ms) => {
      const started = performance.now()
      while (performance.now() - started < ms) {
        begin.run()
        update.run()
        commit.run()
        commits++
      }
      elapsedMs += performance.now() - started
    },
    result: () => ceilingResult(commits, elapsedMs / 1000),
    close: () => {
      db.close()
      removeDb(file)
    }
  }
}

/** Commits for `seconds` seconds and reports the rate. */
export const commitCeiling = (seconds: number): CeilingResult => {
  const ceiling = openCeiling()
  try {
    ceiling.burst(seconds * 1000)
    return ceiling.result()
  } finally {
    ceiling.close()
  }
}
