/**
 * A logical clock for deterministic runs (the seed scenarios, the demo, child processes of the
 * crash and race tests): `currentTimeMillis` is a tick set by the program, and `sleep` really
 * sleeps so that loops still yield. In tests prefer `TestClock`; in production use the default.
 */
import { Clock, Effect } from "effect"
import { sleepsInRealTime } from "./Deadline.js"

/** A clock whose time is set explicitly. */
export interface TickClock {
  /** The Effect `Clock` that reads the current tick. */
  readonly clock: Clock.Clock
  /** Sets the current tick. */
  readonly set: (tick: number) => Effect.Effect<void>
  /** The current tick. */
  readonly get: Effect.Effect<number>
}

/** Creates a logical clock starting at `initial`. */
export const make = (initial = 0): TickClock => {
  let tick = initial
  const real = Clock.make()
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => tick,
    currentTimeMillis: Effect.sync(() => tick),
    unsafeCurrentTimeNanos: () => BigInt(tick) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(tick) * 1_000_000n),
    sleep: (duration) => real.sleep(duration)
  }
  sleepsInRealTime(clock)
  return {
    clock,
    set: (next) => Effect.sync(() => { tick = next }),
    get: Effect.sync(() => tick)
  }
}

/** Runs `effect` with the time fixed at `tick`. */
export const at = (tick: number) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withClock(effect, make(tick).clock)
