/**
 * `Effect.timeout` for the worker's deliveries, cheaper where the clock sleeps in real time. There
 * (the default clock, a `TickClock`) the effect runs in one forked fiber and the deadline is a
 * timer; `Effect.timeout` forks two fibers (the effect's and one that sleeps), races them and joins
 * the winner's fiber refs, which costs a daemon worker about a sixth of its CPU per event on
 * SQLite. Under any other clock (`TestClock`) it is `Effect.timeout`. Either way: the effect's
 * exit; or, once the deadline passes, the effect interrupted (and waited for) and a
 * `TimeoutException`; interrupting the caller interrupts the effect and waits for it. Unlike
 * `Effect.timeout`: an effect that ends by itself after the deadline but before the interruption
 * lands (in an uninterruptible part) gives its own exit — a reply that came is used — and the
 * effect's changes to fiber refs stay in its own fiber.
 */
import { Cause, Clock, Duration, Effect, Exit, Fiber } from "effect"

/** Clocks whose `sleep` is a real timer of that length: the default one, and those registered. */
const realTime = new WeakSet<Clock.Clock>([Effect.runSync(Effect.clock)])

/** Registers a clock whose `sleep` waits in real time (a `TickClock`). */
export const sleepsInRealTime = (clock: Clock.Clock): void => {
  realTime.add(clock)
}

/** The longest delay a JavaScript timer takes; a longer deadline is `Effect.timeout`'s (which never fires). */
const maxTimerMillis = 2 ** 31 - 1

/** `self`, failing with a `TimeoutException` if it has not ended `duration` after it starts. */
export const timeout = <A, E, R>(self: Effect.Effect<A, E, R>, duration: Duration.Duration): Effect.Effect<A, E | Cause.TimeoutException, R> =>
  Effect.clockWith((clock) => {
    const millis = Duration.toMillis(duration)
    if (!realTime.has(clock) || !(millis <= maxTimerMillis)) return Effect.timeout(self, duration)
    return Effect.fiberIdWith((caller) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Effect.fork(restore(self)), (fiber) =>
          restore(Effect.async<A, E | Cause.TimeoutException>((resume) => {
            let late = false
            const timer = setTimeout(() => {
              late = true
              fiber.unsafeInterruptAsFork(caller)
            }, millis)
            const ended = (exit: Exit.Exit<A, E>) => {
              clearTimeout(timer)
              resume(
                late && Exit.isInterrupted(exit)
                  ? Effect.fail(new Cause.TimeoutException(`Operation timed out after '${Duration.format(duration)}'`))
                  : exit
              )
            }
            fiber.addObserver(ended)
            // The caller interrupted: the effect is interrupted and waited for; no resume after that.
            return Effect.suspend(() => {
              clearTimeout(timer)
              fiber.removeObserver(ended)
              return Fiber.interrupt(fiber)
            })
          }))
        )
      )
    )
  })
