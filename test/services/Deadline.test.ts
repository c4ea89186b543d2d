/**
 * The worker's delivery timeout (`Deadline.timeout`): under a clock that sleeps in real time (the
 * default one, a `TickClock`) one forked fiber and a timer; under any other (`TestClock`)
 * `Effect.timeout`. The same outcomes either way. The real-time cases use deadlines of a few
 * milliseconds against effects that never end, or that end at once: no timing is asserted.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Ref, TestClock } from "effect"
import * as Deadline from "../../src/services/Deadline.js"
import * as TickClock from "../../src/services/TickClock.js"

const short = Duration.millis(20)
const long = Duration.seconds(30)

/** An effect that never ends on its own, and records that it was interrupted, and when its finalizer ended. */
const hanging = Effect.gen(function*() {
  const interrupted = yield* Ref.make(false)
  const effect = Effect.never.pipe(Effect.onInterrupt(() => Ref.set(interrupted, true)))
  return { effect, interrupted }
})

const isTimeout = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) && Cause.isFailType(exit.cause) && Cause.isTimeoutException(exit.cause.error)

describe("Deadline.timeout under the default clock", () => {
  it.live("an effect that ends in time gives its value, its failure or its defect", () =>
    Effect.gen(function*() {
      expect(yield* Deadline.timeout(Effect.succeed(7), long)).toBe(7)
      const failed = yield* Effect.exit(Deadline.timeout(Effect.fail("no"), long))
      expect(failed).toStrictEqual(Exit.fail("no"))
      const died = yield* Effect.exit(Deadline.timeout(Effect.die("boom"), long))
      expect(Exit.isFailure(died) && Cause.isDie(died.cause)).toBe(true)
      // An effect that waits before it ends (an async boundary) too.
      expect(yield* Deadline.timeout(Effect.as(Effect.sleep("1 millis"), "later"), long)).toBe("later")
    }))

  it.live("past the deadline the effect is interrupted before the TimeoutException comes back", () =>
    Effect.gen(function*() {
      const { effect, interrupted } = yield* hanging
      const exit = yield* Effect.exit(Deadline.timeout(effect, short))
      expect(isTimeout(exit)).toBe(true)
      expect(yield* Ref.get(interrupted)).toBe(true)
    }))

  it.live("interrupting the caller interrupts the effect and waits for its finalizer", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const finalized = yield* Ref.make(false)
      const effect = Effect.zipRight(Deferred.succeed(started, undefined), Effect.never).pipe(
        Effect.onInterrupt(() => Effect.zipRight(Effect.sleep("5 millis"), Ref.set(finalized, true)))
      )
      const fiber = yield* Effect.fork(Deadline.timeout(effect, long))
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(yield* Ref.get(finalized)).toBe(true)
    }))

  it.live("an effect interrupted from inside before the deadline is not a timeout", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Deadline.timeout(Effect.interrupt, long))
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(isTimeout(exit)).toBe(false)
    }))
})

describe("Deadline.timeout under other clocks", () => {
  it.live("a TickClock sleeps in real time: its deadline is a timer too", () =>
    Effect.gen(function*() {
      const { effect, interrupted } = yield* hanging
      const exit = yield* TickClock.at(0)(Effect.exit(Deadline.timeout(effect, short)))
      expect(isTimeout(exit)).toBe(true)
      expect(yield* Ref.get(interrupted)).toBe(true)
    }))

  it.effect("under TestClock it is Effect.timeout: the deadline passes when the test moves the clock", () =>
    Effect.gen(function*() {
      const { effect, interrupted } = yield* hanging
      const fiber = yield* Effect.fork(Effect.exit(Deadline.timeout(effect, long)))
      yield* TestClock.adjust(Duration.seconds(29))
      expect(yield* Ref.get(interrupted)).toBe(false)
      yield* TestClock.adjust(Duration.seconds(1))
      const exit = yield* Fiber.join(fiber)
      expect(isTimeout(exit)).toBe(true)
      expect(yield* Ref.get(interrupted)).toBe(true)
    }))
})
