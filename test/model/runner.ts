/**
 * Runs one command sequence against a fresh queue (in-memory SQLite unless another opener is
 * given: see `backends.ts`) and the reference model in lockstep, with time driven by the
 * commands. After every command it compares the outcome (value or typed error) and the whole
 * `snapshot` with the model's; the first difference fails with the command index and its
 * arguments. Time is a logical clock the commands set: the queue reads
 * it through Effect's `Clock`. (`realPolicy` opens the real queue with another policy than
 * the model's: only the harness self-test uses it, to show that a divergence is caught.)
 */
import { expect } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as TickClock from "../../src/services/TickClock.js"
import type { PolicyInput } from "../../src/domain/Policy.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import type { OpenQueue } from "./backends.js"
import { sqliteMemory } from "./backends.js"
import type { Command, EnqueueSpec, PauseSpec, RedriveAllSpec, RedriveSpec, RegressibleOp, SettleSpec } from "./commands.js"
import { Actors, FlowPrefixes, Flows, Groups, IdPrefixes, OwnGroup, Reasons } from "./commands.js"
import type { BulkFilter, EnqueueArgs, Json, ModelOptions, ModelPolicy, Result } from "./QueueModel.js"
import { QueueModel } from "./QueueModel.js"

/** Outcome counts over all runs, to check that the generator reaches every path. */
export type Coverage = Map<string, number>

const count = (coverage: Coverage | undefined, key: string) => {
  if (coverage) coverage.set(key, (coverage.get(key) ?? 0) + 1)
}

const bodyOf = (delta: number, note: string, reversed: boolean): Json =>
  reversed ? { note, delta } : { delta, note }

interface Harness {
  readonly queue: RelayQueueService
  readonly model: QueueModel
  /** Every token a claim returned, oldest first. */
  readonly tokens: Array<{ eventId: string; generation: number }>
  nextId: number
  now: number
}

const enqueueArgs = (h: Harness, spec: EnqueueSpec): EnqueueArgs => {
  const events = h.model.allEvents()
  const weight = spec.weight === null ? {} : { weight: spec.weight }
  const groupOf = (flowId: string) => {
    const own = OwnGroup[Math.max(0, Flows.indexOf(flowId as (typeof Flows)[number]))]!
    return spec.group === "omit" ? {} : { group: Groups[spec.group === "own" ? own : (own + 1) % Groups.length]! }
  }
  if (spec.reuse !== null && events.length > 0) {
    const e = events[spec.reuse.pick % events.length]!
    const body = e.body as { delta: number; note: string }
    switch (spec.reuse.variant) {
      case "same":
        return { eventId: e.eventId, flowId: e.flowId, body: bodyOf(body.delta, body.note, false), ...weight, ...groupOf(e.flowId) }
      case "reordered":
        return { eventId: e.eventId, flowId: e.flowId, body: bodyOf(body.delta, body.note, true), ...weight, ...groupOf(e.flowId) }
      case "otherBody":
        return { eventId: e.eventId, flowId: e.flowId, body: bodyOf(body.delta + 1, body.note, false), ...weight, ...groupOf(e.flowId) }
      case "otherFlow": {
        const other = Flows[(Flows.indexOf(e.flowId as (typeof Flows)[number]) + 1) % Flows.length]!
        return { eventId: e.eventId, flowId: other, body: bodyOf(body.delta, body.note, false), ...weight, ...groupOf(other) }
      }
    }
  }
  const flowId = Flows[spec.flow]!
  const eventId = `${IdPrefixes[spec.idStyle]}${h.nextId++}`
  return { eventId, flowId, body: bodyOf(spec.delta, `n${spec.flow}`, spec.delta % 2 === 0), ...weight, ...groupOf(flowId) }
}

const tokenOf = (h: Harness, spec: SettleSpec): { eventId: string; generation: number } => {
  const live = h.tokens.filter((t) => {
    const e = h.model.events.get(t.eventId)?.event
    return e !== undefined && e.state === "inflight" && e.generation === t.generation
  })
  const pool = spec.target === "live" && live.length > 0 ? live : h.tokens
  if (pool.length === 0 || spec.forge === "ghost") return { eventId: "ghost", generation: 1 }
  const t = pool[pool.length - 1 - (spec.pick % pool.length)]!
  switch (spec.forge) {
    case "none":
      return t
    case "older":
      return { eventId: t.eventId, generation: Math.max(0, t.generation - 1) }
    case "newer":
      return { eventId: t.eventId, generation: t.generation + 1 }
  }
}

const redriveArgs = (h: Harness, spec: RedriveSpec) => {
  const reason = Reasons[spec.reason % Reasons.length]!
  const actor = Actors[spec.actor % Actors.length]
  const withActor = actor === undefined ? {} : { actor }
  const all = h.model.allEvents()
  const quarantined = all.filter((e) => e.state === "quarantined")
  const pool = spec.quarantinedOnly && quarantined.length > 0 ? quarantined : all
  if (spec.ghost || pool.length === 0) return { eventId: "no-such-event", expectedGeneration: 1, reason, ...withActor }
  const e = pool[spec.pick % pool.length]!
  return { eventId: e.eventId, expectedGeneration: e.generation + spec.genOffset, reason, ...withActor }
}

const pauseArgs = (spec: PauseSpec) => {
  const reason = Reasons[spec.reason % Reasons.length]!
  const actor = Actors[spec.actor % Actors.length]
  const withActor = actor === undefined ? {} : { actor }
  const known = spec.target < Flows.length
  return spec.kind === "flow"
    ? { flowId: known ? Flows[spec.target]! : "no-such-flow", reason, ...withActor }
    : { group: known ? Groups[spec.target % Groups.length]! : "no-such-group", reason, ...withActor }
}

const redriveAllArgs = (spec: RedriveAllSpec) => {
  const reason = Reasons[spec.reason % Reasons.length]!
  const actor = Actors[spec.actor % Actors.length]
  const filter: BulkFilter = spec.filter === "all"
    ? { all: true }
    : spec.filter === "group"
    ? { group: Groups[spec.which % Groups.length]! }
    : { flowPrefix: FlowPrefixes[spec.which % FlowPrefixes.length]! }
  return {
    filter,
    reason,
    ...(actor === undefined ? {} : { actor }),
    ...(spec.pageSize === null ? {} : { pageSize: spec.pageSize }),
    ...(spec.dryRun ? { dryRun: true } : {})
  }
}

/** The malformed calls of the "invalid" command: each is refused before anything is read. */
const invalidCall = (h: Harness, which: number): { name: string; real: Effect.Effect<unknown, unknown>; model: () => Result<unknown> } => {
  const q = h.queue
  const m = h.model
  const now = h.now
  const token = h.tokens[h.tokens.length - 1] ?? { eventId: "A-1", generation: 1 }
  const cases: ReadonlyArray<{ name: string; real: Effect.Effect<unknown, unknown>; model: () => Result<unknown> }> = [
    { name: "enqueue with an empty event id", real: q.enqueue({ eventId: "", flowId: "A", body: {} }), model: () => m.enqueue({ eventId: "", flowId: "A", body: {} }, now) },
    {
      name: "enqueue with a 201-character flow id",
      real: q.enqueue({ eventId: "x1", flowId: "f".repeat(201), body: {} }),
      model: () => m.enqueue({ eventId: "x1", flowId: "f".repeat(201), body: {} }, now)
    },
    {
      name: "enqueue with a NaN in the body",
      real: q.enqueue({ eventId: "x2", flowId: "A", body: { delta: Number.NaN } }),
      model: () => m.enqueue({ eventId: "x2", flowId: "A", body: { delta: Number.NaN } }, now)
    },
    {
      name: "enqueue with weight 0",
      real: q.enqueue({ eventId: "x3", flowId: "A", body: {}, weight: 0 }),
      model: () => m.enqueue({ eventId: "x3", flowId: "A", body: {}, weight: 0 }, now)
    },
    {
      name: "enqueue with a BEL in the event id",
      real: q.enqueue({ eventId: "x\u00074", flowId: "A", body: {} }),
      model: () => m.enqueue({ eventId: "x\u00074", flowId: "A", body: {} }, now)
    },
    {
      name: "settle with an unknown reply tag",
      real: q.settle(token, { _tag: "Ack" } as never),
      model: () => m.settle(token, { _tag: "Ack" }, now)
    },
    {
      name: "settle with an empty token id",
      real: q.settle({ eventId: "", generation: 1 }, { _tag: "Accepted" }),
      model: () => m.settle({ eventId: "", generation: 1 }, { _tag: "Accepted" }, now)
    },
    {
      name: "settle with a fractional generation",
      real: q.settle({ eventId: token.eventId, generation: token.generation + 0.5 }, { _tag: "Accepted" }),
      model: () => m.settle({ eventId: token.eventId, generation: token.generation + 0.5 }, { _tag: "Accepted" }, now)
    },
    {
      name: "settle with Gap{expected: 0}",
      real: q.settle(token, { _tag: "Gap", expected: 0 }),
      model: () => m.settle(token, { _tag: "Gap", expected: 0 }, now)
    },
    {
      name: "redrive with a negative generation",
      real: q.redrive({ eventId: token.eventId, expectedGeneration: -1, reason: "fix" }),
      model: () => m.redrive({ eventId: token.eventId, expectedGeneration: -1, reason: "fix" }, now)
    },
    { name: "claimBatch(0)", real: q.claimBatch(0), model: () => m.claimBatch(0, now) },
    {
      name: "setFlowWeight above 1,000,000",
      real: q.setFlowWeight({ flowId: "A", weight: 1_000_001 }),
      model: () => m.setFlowWeight({ flowId: "A", weight: 1_000_001 }, now)
    },
    {
      name: "enqueue with a blank group",
      real: q.enqueue({ eventId: "x5", flowId: "A", body: {}, group: " " }),
      model: () => m.enqueue({ eventId: "x5", flowId: "A", body: {}, group: " " }, now)
    },
    {
      name: "setGroupWeight 0",
      real: q.setGroupWeight({ groupId: "t", weight: 0 }),
      model: () => m.setGroupWeight({ groupId: "t", weight: 0 }, now)
    },
    {
      name: "enqueueBatch whose second item is malformed (the first is not stored either)",
      real: q.enqueueBatch([{ eventId: "ok-1", flowId: "B", body: { delta: 1 } }, { eventId: "ok-2", flowId: "B", body: () => 1 }]),
      model: () => m.enqueueBatch([{ eventId: "ok-1", flowId: "B", body: { delta: 1 } }, { eventId: "ok-2", flowId: "B", body: () => 1 }], now)
    },
    {
      name: "settleBatch with one reply lacking its field",
      real: q.settleBatch([{ token, reply: { _tag: "Accepted" } }, { token, reply: { _tag: "Retry" } as never }]),
      model: () => m.settleBatch([{ token, reply: { _tag: "Accepted" } }, { token, reply: { _tag: "Retry" } }], now)
    },
    {
      name: "settleAndClaim with a good reply and a negative limit (nothing is settled)",
      real: q.settleAndClaim([{ token, reply: { _tag: "Accepted" } }], -1),
      model: () => m.settleAndClaim([{ token, reply: { _tag: "Accepted" } }], -1, now)
    },
    {
      name: "settleAndClaim with a malformed reply and a good limit",
      real: q.settleAndClaim([{ token, reply: { _tag: "Gap" } as never }], 1),
      model: () => m.settleAndClaim([{ token, reply: { _tag: "Gap" } }], 1, now)
    }
  ]
  return cases[which % cases.length]!
}

/** Compares a real result with the model's; returns the real value on success. */
const compare = <A>(context: string, expected: Result<unknown>, actual: Either.Either<A, unknown>, coverage?: Coverage): void => {
  if (expected.ok) {
    if (Either.isLeft(actual)) {
      expect.fail(`${context}: expected success ${JSON.stringify(expected.value)}, got error ${describe(actual.left)}`)
    } else {
      const difference = firstDifference(actual.right, expected.value, "outcome")
      if (difference !== undefined) expect.fail(`${context}: ${difference}`)
    }
  } else {
    count(coverage, `error:${expected.error._tag}`)
    if (Either.isRight(actual)) {
      expect.fail(`${context}: expected ${JSON.stringify(expected.error)}, got success ${JSON.stringify(actual.right)}`)
    } else {
      const error = actual.left as Record<string, unknown>
      for (const [key, value] of Object.entries(expected.error)) {
        if (!Object.is(error[key], value)) {
          expect.fail(`${context}: expected error ${JSON.stringify(expected.error)}, got ${describe(actual.left)} (${key}: ${JSON.stringify(error[key])})`)
        }
      }
    }
  }
}

/** The first path at which two JSON-like values differ, with both values, or undefined. */
export const firstDifference = (actual: unknown, expected: unknown, path = "snapshot"): string | undefined => {
  if (Object.is(actual, expected)) return undefined
  const show = (v: unknown) => (v === undefined ? "undefined" : JSON.stringify(v))
  if (typeof actual !== "object" || typeof expected !== "object" || actual === null || expected === null) {
    return `${path}: src has ${show(actual)}, the model ${show(expected)}`
  }
  if (Array.isArray(actual) !== Array.isArray(expected)) return `${path}: src has ${show(actual)}, the model ${show(expected)}`
  const a = actual as Record<string, unknown>
  const e = expected as Record<string, unknown>
  if (Array.isArray(actual) && (actual as Array<unknown>).length !== (expected as Array<unknown>).length) {
    return `${path}: src has ${(actual as Array<unknown>).length} items ${show(actual)}, the model ${(expected as Array<unknown>).length} ${show(expected)}`
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(e)])
  for (const key of keys) {
    const d = firstDifference(a[key], e[key], Array.isArray(actual) ? `${path}[${key}]` : `${path}.${key}`)
    if (d !== undefined) return d
  }
  return undefined
}

const describe = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const tag = (error as { _tag?: unknown })._tag
    const message = (error as { message?: unknown }).message
    return `${String(tag)}: ${String(message)}`
  }
  return String(error)
}

const countOutcome = (coverage: Coverage | undefined, op: string, result: Result<unknown>) => {
  if (!result.ok) return
  const value = result.value as { _tag?: string; wakeAt?: number } | ReadonlyArray<{ _tag: string }> | undefined
  if (op === "settleAndClaim") {
    const { claims, outcomes, wakeAt } = value as { outcomes: ReadonlyArray<{ _tag: string }>; claims: ReadonlyArray<unknown>; wakeAt?: number }
    for (const v of outcomes) count(coverage, `${op}:${v._tag}`)
    count(coverage, `${op}:${claims.length > 0 ? "claimed" : wakeAt === undefined ? "none" : "Idle+wakeAt"}`)
    if (claims.length > 0 && outcomes.some((o) => o._tag === "Acked")) count(coverage, `${op}:Acked+claimed`)
  } else if (op === "redriveAll") {
    const { dryRun, heads, pages } = value as unknown as { dryRun: boolean; heads: ReadonlyArray<unknown>; pages: number }
    count(coverage, `${op}:${dryRun ? "dry" : heads.length > 0 ? "redriven" : "none"}`)
    // Rarely reached (two quarantined heads at once): counted, not required.
    if (pages > 1) count(coverage, `${op}:pages>1`)
  } else if (Array.isArray(value)) {
    count(coverage, `${op}:size${Math.min(value.length, 2)}`)
    for (const v of value) count(coverage, `${op}:${v._tag}`)
  } else if (value !== undefined && typeof value === "object" && "_tag" in value) {
    const v = value as { _tag?: string; wakeAt?: number }
    count(coverage, `${op}:${String(v._tag)}${v._tag === "Idle" ? (v.wakeAt === undefined ? "" : "+wakeAt") : ""}`)
  } else {
    count(coverage, `${op}:ok`)
  }
}

/** One write operation, on the real queue and on the model, with the same arguments. */
interface WriteOp {
  readonly args: unknown
  readonly real: Effect.Effect<unknown, unknown>
  readonly model: (now: number) => Result<unknown>
}

const writeOp = (h: Harness, op: RegressibleOp, command: Command | undefined): WriteOp => {
  const q = h.queue
  const m = h.model
  const enqueueSpec = (command?.t === "enqueue" ? command.spec : undefined) ??
    { flow: 0, reuse: null, delta: 1, weight: null, idStyle: 0, group: "own" as const }
  switch (op) {
    case "enqueue": {
      const args = enqueueArgs(h, enqueueSpec)
      return { args, real: q.enqueue(args as never), model: (now: number) => m.enqueue(args, now) }
    }
    case "enqueueBatch": {
      const specs = command?.t === "enqueueBatch" ? command.specs : [enqueueSpec]
      const args = specs.map((spec) => enqueueArgs(h, spec))
      return { args, real: q.enqueueBatch(args as never), model: (now: number) => m.enqueueBatch(args, now) }
    }
    case "claim":
      return { args: undefined, real: q.claim, model: (now: number) => m.claim(now) }
    case "claimBatch": {
      const limit = command?.t === "claimBatch" ? command.limit : 2
      return { args: limit, real: q.claimBatch(limit), model: (now: number) => m.claimBatch(limit, now) }
    }
    case "settle": {
      const spec: SettleSpec = command?.t === "settle" ? command.spec : { target: "live", pick: 0, forge: "none", reply: { _tag: "Accepted" } }
      const token = tokenOf(h, spec)
      return { args: { token, reply: spec.reply }, real: q.settle(token, spec.reply), model: (now: number) => m.settle(token, spec.reply, now) }
    }
    case "settleBatch": {
      const specs: ReadonlyArray<SettleSpec> = command?.t === "settleBatch"
        ? command.specs
        : [{ target: "live", pick: 0, forge: "none", reply: { _tag: "Accepted" } }]
      const items = specs.map((spec) => ({ token: tokenOf(h, spec), reply: spec.reply }))
      return { args: items, real: q.settleBatch(items), model: (now: number) => m.settleBatch(items, now) }
    }
    case "settleAndClaim": {
      const specs: ReadonlyArray<SettleSpec> = command?.t === "settleAndClaim"
        ? command.specs
        : [{ target: "live", pick: 0, forge: "none", reply: { _tag: "Accepted" } }]
      const limit = command?.t === "settleAndClaim" ? command.limit : 1
      const items = specs.map((spec) => ({ token: tokenOf(h, spec), reply: spec.reply }))
      return { args: { items, limit }, real: q.settleAndClaim(items, limit), model: (now: number) => m.settleAndClaim(items, limit, now) }
    }
    case "redrive": {
      const spec: RedriveSpec = command?.t === "redrive"
        ? command.spec
        : { pick: 0, quarantinedOnly: true, genOffset: 0, reason: 0, actor: 0, ghost: false }
      const args = redriveArgs(h, spec)
      return { args, real: q.redrive(args), model: (now: number) => m.redrive(args, now) }
    }
    case "setFlowWeight": {
      const args = command?.t === "setFlowWeight" ? { flowId: Flows[command.flow]!, weight: command.weight } : { flowId: "A", weight: 2 }
      return { args, real: q.setFlowWeight(args), model: (now: number) => m.setFlowWeight(args, now) }
    }
    case "setGroupWeight": {
      const args = command?.t === "setGroupWeight" ? { groupId: Groups[command.group]!, weight: command.weight } : { groupId: "t", weight: 2 }
      return { args, real: q.setGroupWeight(args), model: (now: number) => m.setGroupWeight(args, now) }
    }
    case "discard": {
      const spec: RedriveSpec = command?.t === "discard"
        ? command.spec
        : { pick: 0, quarantinedOnly: true, genOffset: 0, reason: 0, actor: 1, ghost: false }
      const args = redriveArgs(h, spec)
      return { args, real: q.discard(args), model: (now: number) => m.discard(args, now) }
    }
    case "pause": {
      const spec: PauseSpec = command?.t === "pause" ? command.spec : { resume: false, kind: "flow", target: 0, reason: 0, actor: 1 }
      const args = pauseArgs(spec)
      return {
        args: { ...args, resume: spec.resume },
        real: spec.resume ? q.resume(args) : q.pause(args),
        model: (now: number) => m.setPaused(args, !spec.resume, now)
      }
    }
    case "redriveAll": {
      const spec: RedriveAllSpec = command?.t === "redriveAll"
        ? command.spec
        : { filter: "all", which: 0, pageSize: null, dryRun: false, reason: 0, actor: 1 }
      const args = redriveAllArgs(spec)
      return { args, real: q.redriveAll(args), model: (now: number) => m.redriveAll(args, now) }
    }
  }
}

/** Counts claims of flows in a group and of flows of none. */
const countGroups = (h: Harness, value: unknown, coverage: Coverage | undefined) => {
  for (const c of claimsIn(value)) {
    const flowId = (c as { _tag?: unknown; event?: { flowId: string } })._tag === "Claimed" ? (c as { event: { flowId: string } }).event.flowId : undefined
    if (flowId !== undefined) count(coverage, h.model.flows.get(flowId)?.group == null ? "claim:ungrouped" : "claim:grouped")
  }
}

/** The claims of a `settleAndClaim` result, or the value itself (a claim, or a batch of claims). */
const claimsIn = (value: unknown): ReadonlyArray<unknown> =>
  Array.isArray(value)
    ? value
    : typeof value === "object" && value !== null && "claims" in value
    ? (value as { claims: ReadonlyArray<unknown> }).claims
    : [value]

const recordTokens = (h: Harness, value: unknown) => {
  const claims = claimsIn(value)
  for (const c of claims) {
    if (typeof c === "object" && c !== null && (c as { _tag?: unknown })._tag === "Claimed") {
      h.tokens.push((c as { token: { eventId: string; generation: number } }).token)
    }
  }
}

/**
 * The model's policy as the queue's, every field given: the library's defaults (production values
 * on a millisecond clock) must never leak into the comparison.
 */
export const queuePolicy = (policy: ModelPolicy): PolicyInput => ({
  leaseTicks: policy.leaseTicks,
  retryBudget: policy.retryBudget,
  backoffBase: policy.backoffBase,
  backoffCap: policy.backoffCap,
  admission: policy.admission,
  clock: policy.clock,
  jitter: "none",
  maxBodyBytes: 1_048_576
})

/**
 * Runs `commands` against a fresh queue from `open` (default: SQLite `:memory:`) opened with
 * `policy`, comparing each outcome and the snapshot after each command with the model.
 */
export const runSequence = (
  policy: ModelPolicy,
  commands: ReadonlyArray<Command>,
  options: ModelOptions,
  coverage?: Coverage,
  realPolicy: ModelPolicy = policy,
  open: OpenQueue = sqliteMemory
): Effect.Effect<void, unknown> => {
  // Time is a logical clock set by the commands (TestClock would do too, but its `adjust` yields
  // to the scheduler and costs milliseconds per step).
  const clock = TickClock.make(0)
  return Effect.scoped(
    Effect.gen(function*() {
      const queue = yield* open(queuePolicy(realPolicy))
      const h: Harness = { queue, model: new QueueModel(policy, options), tokens: [], nextId: 0, now: 0 }
      yield* clock.set(0)
      for (const [index, command] of commands.entries()) {
        const context = `command #${index} ${JSON.stringify(command)} at time ${h.now}`
        switch (command.t) {
          case "advance": {
            h.now += command.by
            yield* clock.set(h.now)
            break
          }
          case "regress": {
            const tick = h.model.tick
            if (tick - command.back < 0) {
              count(coverage, "regress:skipped")
              break
            }
            const op = writeOp(h, command.op, undefined)
            const regressedNow = tick - command.back
            yield* clock.set(regressedNow)
            const expected = op.model(regressedNow)
            const actual = yield* Effect.either(op.real)
            yield* clock.set(h.now)
            compare(`${context} (clock set to ${regressedNow}) args ${JSON.stringify(op.args)}`, expected, actual, coverage)
            count(coverage, `regress:${policy.clock}:${expected.ok ? "ok" : expected.error._tag}`)
            if (expected.ok) recordTokens(h, expected.value)
            break
          }
          case "invalid": {
            const call = invalidCall(h, command.which)
            const expected = call.model()
            const actual = yield* Effect.either(call.real)
            compare(`${context} (${call.name})`, expected, actual, coverage)
            break
          }
          default: {
            const op = writeOp(h, command.t, command)
            const tickBefore = h.model.tick
            const expected = op.model(h.now)
            const actual = yield* Effect.either(op.real)
            compare(`${context} args ${JSON.stringify(op.args)}`, expected, actual, coverage)
            countOutcome(coverage, command.t, expected)
            // A no-op (or a failure) at a later time than the stored tick: the tick must stay.
            if (h.now > tickBefore && h.model.tick === tickBefore) count(coverage, "clock:kept-by-no-op")
            if (expected.ok) recordTokens(h, expected.value)
            if (expected.ok && (command.t === "claim" || command.t === "claimBatch" || command.t === "settleAndClaim")) {
              countGroups(h, expected.value, coverage)
              // A claim made while a paused flow had a head it would otherwise have been offered.
              if (h.model.pausedHeadHeld(h.now)) count(coverage, "claim:paused-head-held")
            }
          }
        }
        const snapshot = yield* queue.snapshot
        const expectedSnapshot = h.model.snapshot()
        const difference = firstDifference(snapshot, expectedSnapshot)
        if (difference !== undefined) expect.fail(`snapshot after ${context} differs from the model at ${difference}`)
        expect(snapshot).toEqual(expectedSnapshot)
      }
    })
  ).pipe(Effect.withClock(clock.clock))
}
