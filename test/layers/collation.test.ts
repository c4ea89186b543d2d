/**
 * The domain's tie-break order of flow ids agrees with the order the SQL layer sorts them in.
 */
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { compareIds } from "../../src/domain/Protocol.js"

describe("flow id order", () => {
  it("compareIds orders ids as SQLite's BINARY collation does (UTF-8 bytes), not by UTF-16 code units", () => {
    const ids = ["b", "a", "\uFF01", "😀", "ab", "", "Z", "\u00e9", "\uFFFF", "𐀀"]
    const db = new Database(":memory:")
    const sqlite = db.prepare(`SELECT value FROM json_each(?) ORDER BY value`).all(JSON.stringify(ids))
      .map((row) => (row as { value: string }).value)
    db.close()
    expect([...ids].sort(compareIds)).toEqual(sqlite)
    expect([...ids].sort()).not.toEqual(sqlite)
  })
})
