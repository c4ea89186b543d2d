/**
 * The producer: an application that places orders and, in the same SQLite transaction, enqueues
 * one event per order (the transactional outbox). The queue's tables live in the application's
 * own database file, so an order and its event commit together or not at all.
 *
 *   APP_DB=app.db node --import tsx examples/producer.ts [orders] [customers]
 *
 * Each run places `orders` new orders (default 20) spread over `customers` customers (default 4).
 * Every customer is one flow: its events are delivered in the order they were placed.
 */
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { RelayQueue, SqliteRelayQueue } from "../src/index.js" // in your app: from "fair-relay"

const orders = Number(process.argv[2] ?? 20)
const customers = Number(process.argv[3] ?? 4)

/** Inserts the order and enqueues its event in one transaction that holds the write lock from its start. */
const placeOrder = (customer: string, total: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const queue = yield* RelayQueue
    return yield* SqliteRelayQueue.withImmediateTransaction(sql)(Effect.gen(function*() {
      const [row] = yield* sql<{ readonly n: number }>`SELECT count(*) AS n FROM orders`
      const orderId = `order-${(row?.n ?? 0) + 1}`
      yield* sql`INSERT INTO orders (id, customer, total) VALUES (${orderId}, ${customer}, ${total})`
      yield* queue.enqueue({ eventId: `${orderId}:placed`, flowId: customer, body: { orderId, total } })
      return orderId
    }))
  })

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, total INTEGER NOT NULL)`
  for (let i = 0; i < orders; i++) {
    yield* placeOrder(`customer-${(i % customers) + 1}`, 10 + i)
  }
  console.log(`placed ${orders} orders for ${customers} customers`)
})

const AppDb = SqliteClient.layer({ filename: process.env.APP_DB ?? "app.db" })
const Live = SqliteRelayQueue.layerClient().pipe(Layer.provideMerge(AppDb))

Effect.runPromise(program.pipe(Effect.provide(Live)))
