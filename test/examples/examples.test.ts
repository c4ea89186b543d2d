/**
 * The example app of examples/ runs as three real processes, started the way examples/README.md
 * says (`node --import tsx`): a receiver on an ephemeral loopback port, a worker delivering to it
 * over signed HTTP, and two producers placing orders at once, each order and its event in one
 * transaction of the application's database. Every order reaches the receiver's ledger exactly
 * once, each customer's in seq order and in the order the orders were committed; then the worker
 * and the receiver stop cleanly on SIGTERM.
 */
import { afterAll, describe, expect, it } from "vitest"
import Database from "better-sqlite3"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { makeTestDir } from "../support/tmp.js"

const root = fileURLToPath(new URL("../../", import.meta.url))
const Producers = 2
const OrdersEach = 30
const Customers = 5
const Total = Producers * OrdersEach

const dir = makeTestDir("examples")
const appDb = path.join(dir, "app.db")
const inboxDb = path.join(dir, "inbox.db")
const secret = `whsec_${crypto.randomBytes(32).toString("base64")}`

interface Started {
  readonly child: ChildProcess
  readonly output: () => string
  readonly exit: Promise<number | null>
}

const started: Array<Started> = []

/** Starts `examples/<name>.ts` with node and tsx, as examples/README.md does. */
const start = (name: string, env: Record<string, string>, args: ReadonlyArray<string> = []): Started => {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "examples", `${name}.ts`), ...args], {
    cwd: root, // where `--import tsx` resolves; the stores are in `dir`, given by path
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, WEBHOOK_SECRET: secret, APP_DB: appDb, INBOX_DB: inboxDb, ...env }
  })
  let output = ""
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
  const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const process_ = { child, output: () => output, exit }
  started.push(process_)
  return process_
}

/** Resolves with the first match of `pattern` in the process's output. */
const waitFor = async (proc: Started, pattern: RegExp, millis = 30_000): Promise<RegExpExecArray> => {
  const deadline = Date.now() + millis
  for (;;) {
    const match = pattern.exec(proc.output())
    if (match !== null) return match
    if (proc.child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`no ${pattern} (exit ${proc.child.exitCode}); output:\n${proc.output()}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

interface LedgerLine {
  readonly line: number
  readonly event_id: string
  readonly customer: string
  readonly seq: number
  readonly order_id: string
  readonly total: number
}

const readLedger = (): ReadonlyArray<LedgerLine> => {
  if (!fs.existsSync(inboxDb)) return []
  const db = new Database(inboxDb, { readonly: true, fileMustExist: true })
  try {
    const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'ledger'").get()
    return exists === undefined ? [] : db.prepare("SELECT * FROM ledger ORDER BY line").all() as Array<LedgerLine>
  } finally {
    db.close()
  }
}

afterAll(async () => {
  for (const proc of started) if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGKILL")
  await Promise.all(started.map((proc) => proc.exit))
  fs.rmSync(dir, { recursive: true, force: true })
})

describe("the example app (examples/)", () => {
  it(`producer, worker and receiver processes: ${Total} orders of ${Customers} customers applied once each, in order`, async () => {
    const receiver = start("receiver", { PORT: "0" })
    const url = (await waitFor(receiver, /receiver listening on (http:\/\/127\.0\.0\.1:\d+\/)/))[1]!
    const worker = start("worker", { RECEIVER_URL: url })
    await waitFor(worker, /relay started/) // the worker created the queue's tables in app.db
    const producers = Array.from({ length: Producers }, () => start("producer", {}, [String(OrdersEach), String(Customers)]))
    expect(await Promise.all(producers.map((p) => p.exit)), producers.map((p) => p.output()).join("\n")).toEqual(
      producers.map(() => 0)
    )

    const deadline = Date.now() + 40_000
    while (readLedger().length < Total && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))

    worker.child.kill("SIGTERM")
    receiver.child.kill("SIGTERM")
    expect(await worker.exit, worker.output()).toBe(0)
    expect(await receiver.exit, receiver.output()).toBe(0)

    // The application's orders, in commit order (the producers number them inside their transaction).
    const App = SqliteClient.layer({ filename: appDb })
    const orders = await Effect.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ readonly id: string; readonly customer: string; readonly total: number }>`
        SELECT id, customer, total FROM orders ORDER BY CAST(substr(id, 7) AS INTEGER)`
    }).pipe(Effect.provide(App)))
    expect(orders.length).toBe(Total)

    const ledger = readLedger()
    // Exactly once: one ledger line per order, none for anything else.
    expect(ledger.length, JSON.stringify(ledger)).toBe(Total)
    expect(new Set(ledger.map((line) => line.event_id)).size).toBe(Total)
    expect(ledger.map((line) => [line.order_id, line.customer, line.total]).sort())
      .toEqual(orders.map((order) => [order.id, order.customer, order.total]).sort())
    for (const line of ledger) expect(line.event_id).toBe(`${line.order_id}:placed`)
    // In order: per customer, the ledger holds seq 1..n and the orders in the order they were committed.
    for (let c = 1; c <= Customers; c++) {
      const customer = `customer-${c}`
      const applied = ledger.filter((line) => line.customer === customer)
      expect(applied.map((line) => line.seq)).toEqual(applied.map((_, i) => i + 1))
      expect(applied.map((line) => line.order_id)).toEqual(orders.filter((o) => o.customer === customer).map((o) => o.id))
    }

    // The queue holds every event as acked.
    const stats = await Effect.runPromise(
      Effect.flatMap(SqliteRelayQueue.makeClient(), (queue) => queue.stats).pipe(Effect.provide(App))
    )
    expect(stats.byState).toMatchObject({ acked: Total })
  }, 90_000)
})
