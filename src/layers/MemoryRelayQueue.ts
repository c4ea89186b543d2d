/**
 * The queue in memory: the same contract, outcomes and decisions as the SQL backends, with no file
 * and no persistence — for tests of code that uses `RelayQueue`. Each `make` is a new, empty store.
 */
import { Effect, Layer } from "effect"
import type { InvalidInput } from "../domain/Errors.js"
import * as Options from "../domain/Options.js"
import type { PolicyInput } from "../domain/Policy.js"
import * as RelayQueue from "../services/RelayQueue.js"
import * as MemoryBackend from "./internal/MemoryRelayQueue.js"
import { decodePolicy } from "./internal/QueueSchema.js"

/** Options of an in-memory queue store. */
export interface MemoryRelayQueueOptions {
  /** The policy (defaults: `defaultPolicy`; the article's numbers: `Policy.seed`). Nothing is stored, so nothing is adopted. */
  readonly policy?: PolicyInput | undefined
}

const checkOptions = Options.keysOnly<MemoryRelayQueueOptions>({ policy: true })

/** A new, empty in-memory queue store; invalid options are an `InvalidInput`. */
export const make = (options: MemoryRelayQueueOptions = {}): Effect.Effect<RelayQueue.RelayQueueService, InvalidInput> =>
  Effect.zipRight(
    checkOptions(options, "MemoryRelayQueue.make"),
    Effect.zipWith(decodePolicy(options.policy, "MemoryRelayQueue.make"), MemoryBackend.backend, (policy, backend) =>
      RelayQueue.make(backend, policy))
  )

/** A layer providing `RelayQueue` over a new, empty in-memory store. */
export const layer = (options: MemoryRelayQueueOptions = {}): Layer.Layer<RelayQueue.RelayQueue, InvalidInput> =>
  Layer.effect(RelayQueue.RelayQueue, make(options))
