/**
 * Fault injection: named points on the production code path where a test can make the process
 * die. By default none is installed, and production pays one context lookup per operation.
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

/** No fault injection: the service's default. */
const none = {
  /** Called at each fault point; a test's service may end the process there. */
  hit: (_point: FaultPoint): Effect.Effect<void> => Effect.void
}

/** The fault-injection service; its default reference does nothing. */
export class Faults extends Context.Reference<Faults>()("fair-relay/Faults", { defaultValue: () => none }) {}

/** Passes a fault point. */
export const hit = (point: FaultPoint): Effect.Effect<void> => Effect.flatMap(Faults, (faults) => faults.hit(point))

/**
 * `withFaults(faults)` when a test installed a fault service, else `without`: an operation with
 * fault points around its commit skips them, and whatever they cost (their isolation from the
 * transaction, passing each one), where nothing listens.
 */
export const whenInstalled = <A, E, R>(
  without: Effect.Effect<A, E, R>,
  withFaults: (faults: Context.Tag.Service<Faults>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  // The service read off the fiber's context in the same runtime step: `Effect.flatMap(Faults, …)` would add steps to every operation.
  Effect.withFiberRuntime((fiber) => {
    const faults = Context.get(fiber.currentContext, Faults)
    return faults === none ? without : withFaults(faults)
  })

/**
 * A fault service that ends the process abruptly at `point`: no finalizers, no rollback, no
 * flush — as close to a power cut as a process can do to itself.
 */
export const exitAt = (point: FaultPoint, code = 73): Context.Tag.Service<Faults> => ({
  /** Ends the process when `reached` is the chosen point. */
  hit: (reached) => (reached === point ? Effect.sync(() => process.exit(code)) : Effect.void)
})
