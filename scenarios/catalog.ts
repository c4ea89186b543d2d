/**
 * All demo scenarios, in SPEC §5 order.
 */
import { processScenarios } from "./processes.js"
import { protocolScenarios } from "./protocol.js"
import type { Scenario } from "./Scenario.js"

/** Every scenario with its SPEC §5 number. */
export const catalog: ReadonlyArray<readonly [number, Scenario]> = [...protocolScenarios, ...processScenarios]
  .sort(([a], [b]) => a - b)
