/**
 * Child of the real-process outbox proofs. Arguments: `<locator> <index>`. Opens the application's
 * client and the queue on it (./outboxApp.ts), says `ready`, then follows the parent's commands:
 *
 *   {cmd: "hold", order}     in an application transaction: inserts the order, enqueues its
 *                            event, says `holding` (the enqueue's seq, the orders it sees, its
 *                            PostgreSQL backend pid) and waits — for the parent's SIGKILL.
 *   {cmd: "place", orders}   one application transaction per order, after its gap: insert,
 *                            enqueue, pause, then roll back (a planned failure) or append to
 *                            `order_log` and commit; says `placed` with each order's outcome and
 *                            the seq its enqueue got.
 *
 * It exits 0 when the parent closes its stdin.
 */
import { Cause, Duration, Effect, Option } from "effect"
import type { PlannedOrder } from "./outboxApp.js"
import { appClient, appQueue, inAppTransaction, orderEvent } from "./outboxApp.js"
import { commands, describeError, emit, runMain } from "./io.js"
import { isPostgres } from "./stores.js"

/** What became of one order. */
export interface PlacedOrder {
  readonly orderId: string
  readonly outcome: "committed" | "rolledBack" | "failed"
  /** The seq the enqueue answered inside the transaction (null if it failed before). */
  readonly seq: number | null
  readonly error?: string
}

const main = async () => {
  const [locator, indexText] = process.argv.slice(2)
  if (locator === undefined || indexText === undefined) throw new Error("usage: outboxChild <locator> <index>")
  const index = Number(indexText)
  const input = commands()
  await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const sql = yield* appClient(locator)
    const queue = yield* appQueue(locator, sql)
    const transaction = inAppTransaction(locator, sql)
    const insertOrder = (order: PlannedOrder) => sql`INSERT INTO orders (id, flow_id, process) VALUES (${order.orderId}, ${order.flowId}, ${index})`
    emit({ type: "ready", pid: process.pid })
    for (;;) {
      const command = yield* Effect.promise(() => input.next())
      if (command === undefined) return
      if (command.cmd === "hold") {
        const order = command.order as PlannedOrder
        yield* transaction(Effect.gen(function*() {
          const backend = isPostgres(locator) ? (yield* sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`)[0]!.pid : null
          yield* insertOrder(order)
          const { seq } = yield* queue.enqueue(orderEvent(order))
          const [seen] = yield* sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM orders WHERE id = ${order.orderId}`
          emit({ type: "holding", seq, ordersSeen: Number(seen!.n), backendPid: backend })
          return yield* Effect.never
        }))
      } else if (command.cmd === "place") {
        const results: Array<PlacedOrder> = []
        for (const order of command.orders as ReadonlyArray<PlannedOrder>) {
          let seq: number | null = null
          if (order.gapMillis > 0) yield* Effect.sleep(Duration.millis(order.gapMillis))
          const outcome = yield* transaction(Effect.gen(function*() {
            yield* insertOrder(order)
            seq = (yield* queue.enqueue(orderEvent(order))).seq
            if (order.pauseMillis > 0) yield* Effect.sleep(Duration.millis(order.pauseMillis))
            if (order.rollback) return yield* Effect.fail("planned rollback" as const)
            yield* sql`INSERT INTO order_log (order_id, flow_id) VALUES (${order.orderId}, ${order.flowId})`
            return "committed" as const
          })).pipe(
            // A failure or a defect is reported (and the process goes on), never a crash.
            Effect.catchAllCause((cause) => {
              const failure = Cause.failureOption(cause)
              return Effect.succeed(
                Option.isSome(failure) && failure.value === "planned rollback"
                  ? { outcome: "rolledBack" as const }
                  : { outcome: "failed" as const, error: Option.isSome(failure) ? describeError(failure.value) : Cause.pretty(cause).split("\n")[0]! }
              )
            })
          )
          results.push(typeof outcome === "string" ? { orderId: order.orderId, outcome, seq } : { orderId: order.orderId, ...outcome, seq })
        }
        emit({ type: "placed", results })
      } else {
        return yield* Effect.dieMessage(`unknown command ${JSON.stringify(command)}`)
      }
    }
  })))
  input.close()
}

runMain(main)
