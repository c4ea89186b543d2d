/**
 * The one store check (`StoreCheck.inspect → Empty | Foreign | Version(n)`, `refuse`), the
 * read-only open the CLI's read commands use, and the CLI's log format.
 */
import Database from "better-sqlite3"
import { Cause, Effect, Exit, Logger, Option } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SqliteStore from "../../src/layers/internal/SqliteStore.js"
import * as StoreCheck from "../../src/layers/internal/StoreCheck.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { logger } from "../../src/cli/Output.js"
import { tempDir } from "./support.js"

const dir = tempDir("store-check")
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const sqlite = (name: string, sql: string) => {
  const file = path.join(dir, name)
  const db = new Database(file)
  db.exec(sql)
  db.close()
  return file
}

describe("StoreCheck", () => {
  it("inspect tells an empty database, another one, and a store's version apart", async () => {
    const empty = sqlite("empty.db", "PRAGMA user_version = 1")
    const foreign = sqlite("foreign.db", "CREATE TABLE customer (id INTEGER PRIMARY KEY)")
    const store = path.join(dir, "queue.db")
    await Effect.runPromise(Effect.scoped(SqliteRelayQueue.make({ filename: store })))
    const table = StoreCheck.MigrationsTables.queue
    const inspect = (file: string) => Effect.runPromise(SqliteStore.inspectFile(file, table))
    expect(await inspect(empty)).toEqual(StoreCheck.Contents.Empty())
    expect(await inspect(foreign)).toEqual(StoreCheck.Contents.Foreign({ tables: ["customer"] }))
    const version = await inspect(store)
    expect(version._tag).toBe("Version")
    // A newer version and a foreign database are refused with IncompatibleStore; older ones pass.
    const refuse = (latest: number, contents: StoreCheck.Contents) =>
      Effect.runPromise(Effect.either(StoreCheck.refuse("x.db", table, latest)(contents)))
    const latest = (version as { version: number }).version
    expect((await refuse(latest - 1, version))._tag).toBe("Left")
    expect((await refuse(latest, version))._tag).toBe("Right")
    expect((await refuse(latest, StoreCheck.Contents.Foreign({ tables: ["customer"] })))._tag).toBe("Left")
    expect((await Effect.runPromise(Effect.either(StoreCheck.refuse("pg", table, latest, { foreign: "allow" })(StoreCheck.Contents.Foreign({ tables: ["customer"] })))))._tag).toBe("Right")
  })

  it("a read-only queue reads, refuses writes with ReadonlyStore, and leaves the file byte-identical", async () => {
    const store = path.join(dir, "readonly.db")
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: store })
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
    })))
    const before = fs.readFileSync(store)
    const exit = await Effect.runPromiseExit(Effect.scoped(Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.makeReadonly({ filename: store })
      const stats = yield* queue.stats
      expect(stats.byState.ready).toBe(1)
      return yield* queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 2 } })
    })))
    expect(Exit.isFailure(exit)).toBe(true)
    const error = Exit.isFailure(exit) ? Option.getOrThrow(Cause.failureOption(exit.cause)) : undefined
    expect(error).toMatchObject({ _tag: "SqlError", cause: { _tag: "ReadonlyStore" } })
    expect(fs.readFileSync(store).equals(before)).toBe(true)
    const missing = await Effect.runPromiseExit(Effect.scoped(SqliteRelayQueue.makeReadonly({ filename: path.join(dir, "none.db") })))
    expect(Exit.isFailure(missing)).toBe(true)
    expect(fs.existsSync(path.join(dir, "none.db"))).toBe(false)
  })
})

describe("the CLI's log format", () => {
  it("writes one message= per line however many parts were logged", async () => {
    const written: Array<string> = []
    await Effect.runPromise(
      Effect.logWarning("Dashboard: reading the store failed", { code: "SQLITE_BUSY" }, 3).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
        Effect.withConsole({
          ...globalThis.console,
          unsafe: { ...globalThis.console, error: (line: string) => written.push(line) }
        } as never)
      )
    )
    expect(written).toHaveLength(1)
    expect(written[0]!.match(/ message=/g)).toHaveLength(1)
    expect(written[0]).toContain(`message="Dashboard: reading the store failed {\\"code\\":\\"SQLITE_BUSY\\"} 3"`)
  })
})
