/**
 * All demo scenarios, in the order of docs/protocol.md, Scenarios.
 */
import { processScenarios } from "./processes.js"
import { protocolScenarios } from "./protocol.js"
import type { Scenario } from "./Scenario.js"

/** Every scenario with its number in docs/protocol.md, Scenarios. */
export const catalog: ReadonlyArray<readonly [number, Scenario]> = [...protocolScenarios, ...processScenarios]
  .sort(([a], [b]) => a - b)
