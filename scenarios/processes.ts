/**
 * The demo's real-process scenarios: the 8-process claim race (3) and the six crash points
 * (13–18), each a child process that dies abruptly through the fault-injection service.
 */
import { Effect } from "effect"
import type { FaultPoint } from "../src/services/Faults.js"
import { runClaimRace, runCrashPoint } from "./processes/index.js"
import type { CrashObservation, StepSummary } from "./processes/index.js"
import { arrow } from "./Scenario.js"
import type { Scenario } from "./Scenario.js"

const claimRace: Scenario = {
  name: "claim_race",
  title: "8 OS processes claim at once against one queue file holding A, B, C × 2",
  run: (ctx) =>
    Effect.gen(function*() {
      const race = yield* Effect.promise(() => runClaimRace({ dir: ctx.dir, processes: 8 }))
      ctx.say(`claimed {${race.claimedIds.join(", ")}}, ${race.idleCount} idle, exit codes ${race.exitCodes.join(" ")}`)
      ctx.check("claimed ids", ["A1", "B1", "C1"], race.claimedIds)
      ctx.check("idle processes", 5, race.idleCount)
      ctx.check("failed processes", [], race.failures)
      ctx.check("ticket", 3, race.snapshot.clock.ticket)
      ctx.fact("claimedIds", race.claimedIds)
      ctx.fact("idleCount", race.idleCount)
      ctx.fact("states", race.snapshot.events.map((e) => `${e.eventId}:${e.state}:${e.generation}`))
    })
}

const describeState = (o: CrashObservation) =>
  `ticket ${o.clock.ticket}, A1 ${o.event.state} (attempts ${o.event.attempts}), receipts ${o.receipts.length}, total ${o.counterTotal ?? "none"}`

const describeStep = (s: StepSummary) => (s._tag === "Idle" ? "Idle" : `gen ${s.generation} ${s.reply} → ${s.outcome}`)

/**
 * What docs/protocol.md's table (Crash points) says is visible after each exit, and what recovery
 * at tick 5 does.
 */
const crashTable: ReadonlyArray<{
  readonly number: number
  readonly name: string
  readonly point: FaultPoint
  readonly visible: { readonly ticket: number; readonly state: string; readonly attempts: number; readonly receipts: number }
  readonly recovery: ReadonlyArray<string>
}> = [
  { number: 13, name: "crash_before_claim_commit", point: "claim:before-commit", visible: { ticket: 0, state: "ready", attempts: 0, receipts: 0 }, recovery: ["Accepted", "Idle"] },
  { number: 14, name: "crash_after_claim_commit", point: "claim:after-commit", visible: { ticket: 1, state: "inflight", attempts: 1, receipts: 0 }, recovery: ["Accepted", "Idle"] },
  { number: 15, name: "crash_before_receive_commit", point: "receive:before-commit", visible: { ticket: 1, state: "inflight", attempts: 1, receipts: 0 }, recovery: ["Accepted", "Idle"] },
  { number: 16, name: "crash_after_receive_commit", point: "receive:after-commit", visible: { ticket: 1, state: "inflight", attempts: 1, receipts: 1 }, recovery: ["Duplicate", "Idle"] },
  { number: 17, name: "crash_before_settle_commit", point: "settle:before-commit", visible: { ticket: 1, state: "inflight", attempts: 1, receipts: 1 }, recovery: ["Duplicate", "Idle"] },
  { number: 18, name: "crash_after_settle_commit", point: "settle:after-commit", visible: { ticket: 1, state: "acked", attempts: 1, receipts: 1 }, recovery: ["Idle"] }
]

const crashScenario = (row: (typeof crashTable)[number]): Scenario => ({
  name: row.name,
  title: `a worker process exits abruptly (code 73) at ${row.point}; recovery at tick 5`,
  run: (ctx) =>
    Effect.gen(function*() {
      const result = yield* Effect.promise(() => runCrashPoint({ dir: ctx.dir, point: row.point }))
      const { after, before } = result
      ctx.say(`exit ${result.crashExit.code}; before recovery: ${describeState(before)}`)
      ctx.say(`recovery: ${arrow(result.recoverySteps.map(describeStep))}`)
      ctx.say(`after: ${describeState(after)}`)
      ctx.check("exit code", 73, result.crashExit.code)
      ctx.check("visible before recovery", row.visible, {
        ticket: before.clock.ticket,
        state: before.event.state,
        attempts: before.event.attempts,
        receipts: before.receipts.length
      })
      ctx.check("recovery replies", row.recovery, result.recoverySteps.map((s) => (s._tag === "Idle" ? "Idle" : s.reply)))
      ctx.check("end state", { receipts: 1, total: 7, state: "acked" }, {
        receipts: after.receipts.length,
        total: after.counterTotal,
        state: after.event.state
      })
      ctx.fact("before", { ...before, receipts: before.receipts.map((r) => r.eventId) })
      ctx.fact("recovery", result.recoverySteps.map(describeStep))
      ctx.fact("after", { ...after, receipts: after.receipts.map((r) => r.eventId) })
    })
})

/** The real-process scenarios, by their number in docs/protocol.md, Scenarios. */
export const processScenarios: ReadonlyArray<readonly [number, Scenario]> = [
  [3, claimRace],
  ...crashTable.map((row) => [row.number, crashScenario(row)] as const)
]
