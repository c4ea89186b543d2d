/**
 * fair-relay's core: the services, the protocol, errors and schemas — no store layer, no HTTP. `fair-relay/sqlite` and `fair-relay/postgres` add a backend to it;
 * `fair-relay/http` and `fair-relay/dashboard` are added on their own; `fair-relay` is all of it.
 *
 * @module
 */

/** The queue service (enqueue, claim, settle, redrive, snapshot). */
export { RelayQueue } from "./services/RelayQueue.js"
export { MaxBatchSize, MaxWeight } from "./services/RelayQueue.js"
export type {
  AuditFilter,
  ClaimBatch,
  ClockReset,
  DiscardInput,
  EnqueueInput,
  EventFilter,
  FlowView,
  FlowWeightInput,
  GroupFilter,
  GroupView,
  GroupWeightInput,
  PageFilter,
  PauseInput,
  PauseResult,
  PolicyChange,
  QueueStats,
  RedriveAllInput,
  RedriveAllResult,
  RedriveFilterInput,
  RedriveInput,
  RedrivenHead,
  RelayQueueService,
  ResetClockInput,
  SetPolicyInput,
  SettledAndClaimed,
  SettleInput,
  TokenInput
} from "./services/RelayQueue.js"
/** The receiver service. */
export { Inbox } from "./services/Inbox.js"
export type { ApplyResult, InboxBusiness, InboxService, ReceiptRecord } from "./services/Inbox.js"
/** How a worker reaches a receiver. */
export { DeliveryFailed, Transport } from "./services/Transport.js"
export type { TransportService } from "./services/Transport.js"
/** The worker: claim → deliver → settle, and the worker daemon. */
export { Relay, RelayConfigError, runConfig } from "./services/Relay.js"
export type { BatchResult, RelayService, RunOptions, StepError, StepResult } from "./services/Relay.js"
/** Every metric of the relay. */
export * as Metrics from "./services/Metrics.js"
/** Retention: how long acked events, dedup records and receipts are kept, and what a prune did. */
export type { InboxRetentionInput, PruneOptions, PruneResult, Retention, RetentionInput } from "./services/Retention.js"
export type { InboxPruneResult, InboxRetention } from "./services/Inbox.js"
/** Fault injection points on the worker's path (tests, chaos). */
export * as Faults from "./services/Faults.js"
/** A logical clock for deterministic runs. */
export * as TickClock from "./services/TickClock.js"

/** Typed errors. */
export {
  ClockRegressed,
  EnqueueConflict,
  GroupConflict,
  EventNotFound,
  GenerationMismatch,
  IncompatibleStore,
  PolicyMismatch,
  InvalidInput,
  MissingReason,
  NotQuarantined,
  TargetNotFound
} from "./domain/Errors.js"
export type { RedriveError } from "./domain/Errors.js"
/** Outcome and reply schemas and types. */
export * from "./domain/Outcomes.js"
/** A queue's notable changes (quarantines and operator actions), as `RelayQueue.changes` tells them. */
export * as Notable from "./domain/Notable.js"
/** Stored records and their schemas. */
export * from "./domain/Records.js"
/** Ids and counters. */
export { EventId, FlowId, Generation, GroupId, MaxIdLength, Seq, Tick } from "./domain/Ids.js"
/** The retry and lease policy. */
export { backoff, defaultPolicy, makePolicy, protocolKeys, RelayPolicy, retentionKeys, retryDelay, seedPolicy } from "./domain/Policy.js"
/** The longest lease or backoff delay a policy takes. */
export { MaxTicks } from "./domain/Options.js"
/** Policy presets: `Policy.seed` (the article's numbers) and `Policy.defaults` (production). */
export * as Policy from "./domain/Presets.js"
export type { PolicyInput, PolicyKey, ProtocolKey } from "./domain/Policy.js"
/** Canonical JSON bodies. */
export { canonicalize, DefaultMaxBodyBytes } from "./domain/Json.js"
export type { CanonicalBody, Json } from "./domain/Json.js"
/** The pure protocol decisions. */
export * as Protocol from "./domain/Protocol.js"
/** The seed's sample business (a per-flow counter). */
export * as Counter from "./sample/Counter.js"
