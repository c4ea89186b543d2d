/**
 * Group commit inside one process: calls that arrive while a batch is running are gathered and
 * run together as the next batch. Under load the batches grow by themselves; alone, a call runs
 * at once (no waiting for company).
 */
import { Chunk, Deferred, Effect, Exit, Queue } from "effect"
import type { Scope } from "effect"

/**
 * Makes `one(item)` run through `many(items)`, which must answer one output per item in order.
 * A failed batch fails every call in it. The gathering fiber lives as long as the scope.
 */
export const make = <I, O, E>(
  many: (items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>, E>,
  maxBatch: number
): Effect.Effect<(item: I) => Effect.Effect<O, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const pending = yield* Queue.unbounded<readonly [I, Deferred.Deferred<O, E>]>()
    const runBatch = Effect.gen(function*() {
      const first = yield* Queue.take(pending)
      // Let the fibers that are ready run up to their call before the batch is closed: the store
      // calls are synchronous, so without this yield a batch would rarely hold more than one.
      yield* Effect.yieldNow()
      const batch = [first, ...Chunk.toReadonlyArray(yield* Queue.takeUpTo(pending, maxBatch - 1))]
      const exit = yield* Effect.exit(many(batch.map(([item]) => item)))
      yield* Exit.match(exit, {
        onFailure: (cause) => Effect.forEach(batch, ([, deferred]) => Deferred.failCause(deferred, cause), { discard: true }),
        onSuccess: (outputs) => Effect.forEach(batch, ([, deferred], i) => Deferred.succeed(deferred, outputs[i]!), { discard: true })
      })
    })
    yield* Effect.forkScoped(Effect.forever(runBatch))
    return (item: I) =>
      Effect.flatMap(Deferred.make<O, E>(), (deferred) => Effect.zipRight(Queue.offer(pending, [item, deferred]), Deferred.await(deferred)))
  })
