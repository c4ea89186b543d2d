/**
 * All demo scenarios, in SPEC §5 order.
 */
import { protocolScenarios } from "./protocol.js"
import type { Scenario } from "./Scenario.js"

/** Every scenario with its SPEC §5 number. */
export const catalog: ReadonlyArray<readonly [number, Scenario]> = [...protocolScenarios].sort(([a], [b]) => a - b)
