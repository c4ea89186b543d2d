/** The scenario world, with time driven by TestClock (ticks are the clock's milliseconds). */
import { TestClock } from "effect"

export * from "../../scenarios/World.js"

/** Sets the test clock to `tick`. */
export const at = (tick: number) => TestClock.setTime(tick)
