/**
 * A write without the store's lock (`rowLockedWrite`, parallel claims) that loses a race the
 * database detects — a serialization failure, a deadlock, a unique violation of two inserts of
 * one new row — runs again from its start, up to five times more; any other failure is the
 * caller's at once. Nothing of a failed attempt is stored.
 */
import { it } from "@effect/vitest"
import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { expect } from "vitest"
import * as PgStore from "../../src/layers/internal/PgStore.js"
import { execWrite } from "../../src/layers/internal/Store.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

const migrations = {
  "1_tables": Effect.gen(function*() {
    const sql = yield* SqlClient
    yield* sql`CREATE TABLE attempt (n INTEGER PRIMARY KEY)`
  })
}

/** The store, and a write that stores its attempt's number and then fails with `codes[n - 1]` (none past their end). */
const setup = (url: string, codes: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const schema = yield* freshSchema(url)
    const store = yield* PgStore.open({ url: schema.url, maxConnections: 2 }, migrations, "test_migrations", "test_store")
    const { sql } = store
    let attempts = 0
    const write = store.rowLockedWrite(Effect.gen(function*() {
      const n = ++attempts
      yield* execWrite(store, sql`INSERT INTO attempt (n) VALUES (${n})`)
      const code = codes[n - 1]
      // A real failure of the server, with the code given (RAISE … USING ERRCODE).
      if (code !== undefined) yield* sql.unsafe(`DO $$ BEGIN RAISE EXCEPTION 'attempt ${n} fails' USING ERRCODE = '${code}'; END $$`)
      return n
    }))
    const stored = Effect.map(schema.admin.unsafe<{ readonly n: number }>(`SELECT n FROM "${schema.name}".attempt ORDER BY n`), (rows) => rows.map((row) => row.n))
    return { write, stored, attempts: () => attempts }
  })

const codeOf = (error: unknown) => ((error as SqlError).cause as { readonly code?: unknown } | undefined)?.code

describePg("PostgreSQL: a row-locked write that lost a race runs again", (url) => {
  it.scopedLive("a serialization failure, a deadlock, a unique violation: again from the start; only the attempt that commits is stored", () =>
    Effect.gen(function*() {
      const { attempts, stored, write } = yield* setup(url, ["40001", "40P01", "23505"])
      expect(yield* write).toBe(4)
      expect(attempts()).toBe(4)
      expect(yield* stored).toEqual([4])
    }))

  it.scopedLive("six attempts at most: the sixth's failure is the caller's, and nothing is stored", () =>
    Effect.gen(function*() {
      const { attempts, stored, write } = yield* setup(url, Array.from({ length: 10 }, () => "40001"))
      const error = yield* Effect.flip(write)
      expect(error).toBeInstanceOf(SqlError)
      expect(codeOf(error)).toBe("40001")
      expect(attempts()).toBe(6)
      expect(yield* stored).toEqual([])
    }))

  it.scopedLive("any other failure is not run again", () =>
    Effect.gen(function*() {
      const { attempts, stored, write } = yield* setup(url, ["22012"])
      expect(codeOf(yield* Effect.flip(write))).toBe("22012")
      expect(attempts()).toBe(1)
      expect(yield* stored).toEqual([])
    }))
})
