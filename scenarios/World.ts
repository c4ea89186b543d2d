/**
 * A queue store and a receiver store (the sample counter) in one program: what the scenario demo
 * and the service tests run against. Time is whatever `Clock` the caller provides.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Ref } from "effect"
import type { ClockRegressed, InvalidInput } from "../src/domain/Errors.js"
import type { Scope } from "effect"
import * as Counter from "../src/sample/Counter.js"
import type { InboxBusiness, InboxService } from "../src/services/Inbox.js"
import type { RelayQueueService } from "../src/services/RelayQueue.js"
import type { Claimed, DeliveryReply, SettleOutcome } from "../src/domain/Outcomes.js"
import * as SqliteInbox from "../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../src/layers/SqliteRelayQueue.js"
import { seedPolicy } from "../src/domain/Policy.js"
import { deliveryOf } from "../src/domain/Protocol.js"
import type { RelayPolicy } from "../src/domain/Policy.js"

export interface World {
  readonly queue: RelayQueueService
  readonly inbox: InboxService
  readonly maxDelta: Ref.Ref<number>
  /** Claims at the current time; dies if idle (a scenario that expects a claim is broken). */
  readonly claim: Effect.Effect<typeof Claimed.Type, Failure>
  /** Delivers a claimed event to the receiver. */
  readonly deliver: (claimed: typeof Claimed.Type) => Effect.Effect<DeliveryReply, Failure>
  /** claim → deliver → settle; `null` when idle. */
  readonly step: Effect.Effect<{ readonly eventId: string; readonly reply: DeliveryReply; readonly outcome: SettleOutcome } | null, Failure>
  /** The counter projection's totals. */
  readonly totals: Effect.Effect<ReadonlyMap<string, number>, Failure>
}

/** What a world operation can fail with. */
export type Failure = ClockRegressed | InvalidInput | SqlError

/** How to open the two stores of a world: a backend. */
export interface Stores {
  readonly queue: (policy: Partial<RelayPolicy> | undefined) => Effect.Effect<RelayQueueService, unknown, Scope.Scope>
  readonly inbox: (business: InboxBusiness) => Effect.Effect<InboxService, unknown, Scope.Scope>
}

/** Both stores on SQLite (":memory:" unless files are named). */
export const sqliteStores = (queueFile = ":memory:", inboxFile = ":memory:"): Stores => ({
  queue: (policy) => SqliteRelayQueue.make({ filename: queueFile, policy }),
  inbox: (business) => SqliteInbox.make({ filename: inboxFile, business })
})

export interface WorldOptions {
  /** The backend (default: SQLite, in the named files or in memory). */
  readonly stores?: Stores
  readonly queueFile?: string
  readonly inboxFile?: string
  readonly maxDelta?: number
  /** Overrides of the seed policy (`seedPolicy`), which a world runs by default. */
  readonly policy?: Partial<RelayPolicy>
}

/** Opens both stores for the scope of the caller. */
export const makeWorld = (options: WorldOptions = {}): Effect.Effect<World, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const stores = options.stores ?? sqliteStores(options.queueFile, options.inboxFile)
    const queue = yield* stores.queue({ ...seedPolicy, ...options.policy })
    const maxDelta = yield* Ref.make(options.maxDelta ?? 1000)
    const inbox = yield* stores.inbox(Counter.business(maxDelta))
    const claim = Effect.flatMap(queue.claim, (outcome) =>
      outcome._tag === "Claimed" ? Effect.succeed(outcome) : Effect.dieMessage("expected a claim, got Idle"))
    const deliver = (claimed: typeof Claimed.Type) =>
      inbox.receive(deliveryOf(claimed))
    const step = Effect.gen(function*() {
      const outcome = yield* queue.claim
      if (outcome._tag === "Idle") return null
      const reply = yield* deliver(outcome)
      return { eventId: outcome.event.eventId, reply, outcome: yield* queue.settle(outcome.token, reply) }
    })
    const totals = inbox.read(Counter.totals)
    return { queue, inbox, maxDelta, claim, deliver, step, totals }
  })
