/**
 * Fault injection: named points on the production code path where a test can make the process
 * die. The default does nothing, so production pays one context lookup per point.
 */
import { Context, Effect } from "effect"

/** Where a fault can be injected: just before or just after each commit of a worker step. */
export type FaultPoint =
  | "claim:before-commit"
  | "claim:after-commit"
  | "receive:before-commit"
  | "receive:after-commit"
  | "settle:before-commit"
  | "settle:after-commit"

/** All fault points, in the order a worker step passes them. */
export const faultPoints: ReadonlyArray<FaultPoint> = [
  "claim:before-commit",
  "claim:after-commit",
  "receive:before-commit",
  "receive:after-commit",
  "settle:before-commit",
  "settle:after-commit"
]

/** The fault-injection service; its default reference does nothing. */
export class Faults extends Context.Reference<Faults>()("fair-relay/Faults", {
  defaultValue: () => ({ hit: (_point: FaultPoint): Effect.Effect<void> => Effect.void })
}) {}

/** Passes a fault point. */
export const hit = (point: FaultPoint): Effect.Effect<void> => Effect.flatMap(Faults, (faults) => faults.hit(point))

/**
 * A fault service that ends the process abruptly at `point`: no finalizers, no rollback, no
 * flush — as close to a power cut as a process can do to itself.
 */
export const exitAt = (point: FaultPoint, code = 73): Context.Tag.Service<Faults> => ({
  hit: (reached) => (reached === point ? Effect.sync(() => process.exit(code)) : Effect.void)
})
