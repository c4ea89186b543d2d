/**
 * `Effect.timeout` for the worker's deliveries, cheaper where the clock sleeps in real time. There
 * (the default clock, a `TickClock`) the effect runs in a fiber of its own, started at once on the
 * caller's stack: one that ends without waiting — an in-process inbox's delivery does — is done
 * before a timer would be set, and the caller goes on without an asynchronous boundary; one that
 * waits gets a timer for what is left of the deadline. `Effect.timeout` forks two fibers (the
 * effect's and one that sleeps), races them and joins the winner's fiber refs, which costs a
 * daemon worker about a sixth of its CPU per event on SQLite. Under any other clock
 * (`TestClock`) it is `Effect.timeout`. Either way: the effect's exit; or, once the deadline
 * passes, the effect interrupted (and waited for) and a `TimeoutException`; interrupting the
 * caller interrupts the effect and waits for it. Unlike `Effect.timeout`: an effect that ends by
 * itself after the deadline but before the interruption lands (in an uninterruptible part, or
 * before it first waits) gives its own exit — a reply that came is used — and the effect's
 * changes to fiber refs stay in its own fiber.
 *
 * The delivery's log annotations and its duration come with it (`timed`): where the effect has a
 * fiber of its own, they are set on that fiber and read off the clock around it, where
 * `Effect.annotateLogs` and `Effect.timed` around it would add their own runtime steps to every
 * delivery.
 */
import { Cause, Clock, Duration, Effect, Exit, Fiber, FiberRef, HashMap, Runtime } from "effect"

/** Clocks whose `sleep` is a real timer of that length: the default one, and those registered. */
const realTime = new WeakSet<Clock.Clock>([Effect.runSync(Effect.clock)])

/** Registers a clock whose `sleep` waits in real time (a `TickClock`). */
export const sleepsInRealTime = (clock: Clock.Clock): void => {
  realTime.add(clock)
}

/** The longest delay a JavaScript timer takes; a longer deadline is `Effect.timeout`'s (which never fires). */
const maxTimerMillis = 2 ** 31 - 1

/** `annotations` added to a fiber's log annotations, as `Effect.annotateLogs` adds them. */
const annotated = (current: HashMap.HashMap<string, unknown>, annotations: Readonly<Record<string, unknown>>) => {
  let out = current
  for (const key in annotations) out = HashMap.set(out, key, annotations[key])
  return out
}

/**
 * `self` with `annotations` on its logs, and how long it took with its value; failing with a
 * `TimeoutException` if it has not ended `duration` after it starts.
 */
export const timed = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  duration: Duration.Duration,
  annotations: Readonly<Record<string, unknown>> = {}
): Effect.Effect<readonly [Duration.Duration, A], E | Cause.TimeoutException, R> =>
  Effect.clockWith((clock) => {
    const millis = Duration.toMillis(duration)
    if (!realTime.has(clock) || !(millis <= maxTimerMillis)) {
      return Effect.timed(Effect.timeout(Effect.annotateLogs(self, annotations), duration))
    }
    // The annotations are set on the effect's own fiber, which ends with it: nothing to put back.
    const own = Effect.zipRight(FiberRef.update(FiberRef.currentLogAnnotations, (current) => annotated(current, annotations)), self)
    return Effect.fiberIdWith((caller) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Effect.runtime<R>(), (runtime) => {
          const start = clock.unsafeCurrentTimeNanos()
          const timedExit = (exit: Exit.Exit<A, E>) =>
            Exit.map(exit, (value) => [Duration.nanos(clock.unsafeCurrentTimeNanos() - start), value] as const)
          // The effect starts at once, on this stack (with the caller's context and fiber refs, as a
          // fork would): one that ends without waiting needs no timer.
          const fiber = Runtime.runFork(runtime)(restore(own))
          const done = fiber.unsafePoll()
          if (done !== null) return timedExit(done)
          // The deadline counts from the start, the part before the effect first waited included.
          const left = Math.max(0, millis - Number(clock.unsafeCurrentTimeNanos() - start) / 1e6)
          return restore(Effect.async<readonly [Duration.Duration, A], E | Cause.TimeoutException>((resume) => {
            let late = false
            const timer = setTimeout(() => {
              late = true
              fiber.unsafeInterruptAsFork(caller)
            }, left)
            const ended = (exit: Exit.Exit<A, E>) => {
              clearTimeout(timer)
              resume(
                late && Exit.isInterrupted(exit)
                  ? Effect.fail(new Cause.TimeoutException(`Operation timed out after '${Duration.format(duration)}'`))
                  : timedExit(exit)
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
        })
      )
    )
  })
