/**
 * The queue in memory: a SQLite database of its own that lives in this process only (`:memory:`),
 * so the contract, outcomes and decisions are the SQLite store's, with no file and no persistence —
 * for tests of code that uses `RelayQueue`. Each `make` is a new, empty store, gone with its scope.
 */
import { Effect, Layer } from "effect"
import type { Scope } from "effect"
import { InvalidInput } from "../domain/Errors.js"
import * as Options from "../domain/Options.js"
import type { PolicyInput } from "../domain/Policy.js"
import * as RelayQueue from "../services/RelayQueue.js"
import { decodePolicy } from "./internal/QueueSchema.js"
import * as SqliteRelayQueue from "./SqliteRelayQueue.js"

/** Options of an in-memory queue store. */
export interface MemoryRelayQueueOptions {
  /** The policy (defaults: `defaultPolicy`; the article's numbers: `Policy.seed`). Nothing is stored before, so nothing is adopted. */
  readonly policy?: PolicyInput | undefined
}

const checkOptions = Options.keysOnly<MemoryRelayQueueOptions>({ policy: true })

/**
 * A new, empty in-memory queue store for the lifetime of the scope; invalid options are an
 * `InvalidInput`. A database in memory that cannot be opened is a defect.
 */
export const make = (options: MemoryRelayQueueOptions = {}): Effect.Effect<RelayQueue.RelayQueueService, InvalidInput, Scope.Scope> =>
  Effect.zipRight(
    Effect.zipRight(checkOptions(options, "MemoryRelayQueue.make"), decodePolicy(options.policy, "MemoryRelayQueue.make")),
    SqliteRelayQueue.make({ filename: ":memory:", policy: options.policy }).pipe(
      Effect.catchIf((error) => !(error instanceof InvalidInput), (error) => Effect.die(error))
    )
  )

/** A layer providing `RelayQueue` over a new, empty in-memory store. */
export const layer = (options: MemoryRelayQueueOptions = {}): Layer.Layer<RelayQueue.RelayQueue, InvalidInput> =>
  Layer.scoped(RelayQueue.RelayQueue, make(options))
