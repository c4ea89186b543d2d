/**
 * The worker's delivery timeout (`Deadline.timed`): under a clock that sleeps in real time (the
 * default one, a `TickClock`) a fiber started at once and, once it waits, a timer; under any
 * other (`TestClock`) `Effect.timeout`. The same outcomes either way. The real-time cases use
 * deadlines of a few milliseconds against effects that never end, that end at once, or that work
 * without waiting for longer than the deadline: no timing is asserted (the duration it measures is
 * checked under `TestClock` only). The log annotations it is given are on the effect's logs, and
 * only there.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Ref, TestClock } from "effect"
import * as Deadline from "../../src/services/Deadline.js"
import * as TickClock from "../../src/services/TickClock.js"
import { captureLogs } from "../support/logs.js"

const short = Duration.millis(20)
const long = Duration.seconds(30)

/** An effect that never ends on its own, and records that it was interrupted, and when its finalizer ended. */
const hanging = Effect.gen(function*() {
  const interrupted = yield* Ref.make(false)
  const effect = Effect.never.pipe(Effect.onInterrupt(() => Ref.set(interrupted, true)))
  return { effect, interrupted }
})

/** `Deadline.timed`'s value alone. */
const timeout = <A, E, R>(self: Effect.Effect<A, E, R>, duration: Duration.Duration) =>
  Effect.map(Deadline.timed(self, duration), ([, value]) => value)

/** The annotations of the logs `effect` writes, in order, each as an object. */
const loggedAnnotations = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const { layer, logs } = captureLogs()
    return Effect.map(Effect.provide(effect, layer), () => logs.map((log) => log.annotations))
  })

/** Work that does not wait, for `millis` of wall time, then `value`. */
const busy = <A>(millis: number, value: A) =>
  Effect.sync(() => {
    const until = Date.now() + millis
    while (Date.now() < until) { /* the work */ }
    return value
  })

const isTimeout = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) && Cause.isFailType(exit.cause) && Cause.isTimeoutException(exit.cause.error)

describe("Deadline.timed under the default clock", () => {
  it.live("an effect that ends in time gives its value, its failure or its defect", () =>
    Effect.gen(function*() {
      expect(yield* timeout(Effect.succeed(7), long)).toBe(7)
      const failed = yield* Effect.exit(timeout(Effect.fail("no"), long))
      expect(failed).toStrictEqual(Exit.fail("no"))
      const died = yield* Effect.exit(timeout(Effect.die("boom"), long))
      expect(Exit.isFailure(died) && Cause.isDie(died.cause)).toBe(true)
      // An effect that waits before it ends (an async boundary) too.
      expect(yield* timeout(Effect.as(Effect.sleep("1 millis"), "later"), long)).toBe("later")
    }))

  it.live("past the deadline the effect is interrupted before the TimeoutException comes back", () =>
    Effect.gen(function*() {
      const { effect, interrupted } = yield* hanging
      const exit = yield* Effect.exit(timeout(effect, short))
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
      const fiber = yield* Effect.fork(timeout(effect, long))
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(yield* Ref.get(finalized)).toBe(true)
    }))

  it.live("the deadline counts from the start: time spent before the effect first waits is not given again", () =>
    Effect.gen(function*() {
      // 40 ms of work that does not wait, then a wait of 30 ms, against a deadline of 50 ms: the
      // timer set when the effect first waits fires after what is left (10 ms), before the wait
      // ends; a timer of the whole 50 ms would let the effect end with its value.
      const exit = yield* Effect.exit(timeout(Effect.zipRight(busy(40, undefined), Effect.as(Effect.sleep("30 millis"), "ended")), Duration.millis(50)))
      expect(isTimeout(exit)).toBe(true)
    }))

  it.live("an effect that ends without waiting gives its exit, however long it took", () =>
    Effect.gen(function*() {
      // Nothing can interrupt work that never waits: its value is used, as a reply that came is.
      expect(yield* timeout(busy(30, "done"), Duration.millis(5))).toBe("done")
    }))

  it.live("an effect interrupted from inside before the deadline is not a timeout", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(timeout(Effect.interrupt, long))
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(isTimeout(exit)).toBe(false)
    }))
})

describe("Deadline.timed under other clocks", () => {
  it.live("a TickClock sleeps in real time: its deadline is a timer too", () =>
    Effect.gen(function*() {
      const { effect, interrupted } = yield* hanging
      const exit = yield* TickClock.at(0)(Effect.exit(timeout(effect, short)))
      expect(isTimeout(exit)).toBe(true)
      expect(yield* Ref.get(interrupted)).toBe(true)
    }))

  it.effect("under TestClock it is Effect.timeout: the deadline passes when the test moves the clock", () =>
    Effect.gen(function*() {
      const { effect, interrupted } = yield* hanging
      const fiber = yield* Effect.fork(Effect.exit(timeout(effect, long)))
      yield* TestClock.adjust(Duration.seconds(29))
      expect(yield* Ref.get(interrupted)).toBe(false)
      yield* TestClock.adjust(Duration.seconds(1))
      const exit = yield* Fiber.join(fiber)
      expect(isTimeout(exit)).toBe(true)
      expect(yield* Ref.get(interrupted)).toBe(true)
    }))
})

describe("Deadline.timed: annotations and duration", () => {
  const annotations = { eventId: "e-1", flowId: "f-1" }
  /** Logs inside the effect, then once after it in the caller. */
  const logInsideThenAfter = (run: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<unknown, unknown, R>) =>
    loggedAnnotations(
      Effect.zipRight(
        Effect.annotateLogs(run(Effect.logInfo("inside")), { worker: 0 }),
        Effect.logInfo("after")
      )
    )

  it.live("under the default clock: the effect's logs carry them (with the caller's), the caller's later logs do not", () =>
    Effect.gen(function*() {
      const seen = yield* logInsideThenAfter((self) => Deadline.timed(self, long, annotations))
      expect(seen).toStrictEqual([{ worker: 0, eventId: "e-1", flowId: "f-1" }, {}])
    }))

  it.live("a failure or a timeout leaves the caller's annotations as they were", () =>
    Effect.gen(function*() {
      const seen = yield* loggedAnnotations(
        Effect.gen(function*() {
          yield* Effect.exit(Deadline.timed(Effect.zipRight(Effect.logInfo("failing"), Effect.fail("no")), long, annotations))
          yield* Effect.exit(Deadline.timed(Effect.zipRight(Effect.logInfo("hanging"), Effect.never), short, annotations))
          yield* Effect.logInfo("after")
        })
      )
      expect(seen).toStrictEqual([annotations, annotations, {}])
    }))

  it.effect("under TestClock: the same annotations, and the duration is the time the clock moved", () =>
    Effect.gen(function*() {
      const seen = yield* logInsideThenAfter((self) => Deadline.timed(self, long, annotations))
      expect(seen).toStrictEqual([{ worker: 0, eventId: "e-1", flowId: "f-1" }, {}])
      const fiber = yield* Effect.fork(Deadline.timed(Effect.as(Effect.sleep(Duration.seconds(5)), "done"), long, annotations))
      yield* TestClock.adjust(Duration.seconds(5))
      const [elapsed, value] = yield* Fiber.join(fiber)
      expect(value).toBe("done")
      expect(Duration.toMillis(elapsed)).toBe(5_000)
    }))
})
