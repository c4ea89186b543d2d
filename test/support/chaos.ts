/**
 * The chaos runs of the test suite (`scenarios/chaos/main.ts`, end to end through its CLI): one
 * run, and the checks every run must pass — no violation found on the stores, every event acked,
 * processes really killed, a zero exit.
 */
import { expect } from "vitest"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import type { ChaosResult } from "../../scenarios/chaos/run.js"
import { spawnChild } from "../../scenarios/processes/spawn.js"

const main = fileURLToPath(new URL("../../scenarios/chaos/main.ts", import.meta.url))

/** What a chaos run printed: its result, its summary line, its stderr and how it exited. */
export interface ChaosRun {
  readonly result: ChaosResult
  readonly summary: string | undefined
  readonly stderr: string
  readonly exitCode: number | null
}

/** Runs `npm run chaos -- <args> --dir <dir> --json --quiet` and waits for its result (the summary line is logged). */
export const runChaos = async (dir: string, args: ReadonlyArray<string>): Promise<ChaosRun> => {
  const child = spawnChild(main, ["--dir", dir, ...args, "--json", "--quiet"])
  try {
    const message = await child.expect("result", 280_000)
    const exit = await child.exit
    const summary = child.noise().find((line) => line.startsWith("kills="))
    console.log(summary)
    return { result: message.result as ChaosResult, summary, stderr: child.stderr(), exitCode: exit.code }
  } finally {
    child.kill()
    await child.exit
  }
}

/**
 * What every run must show: no violation, all `events` acked, nothing lost, twice or out of order,
 * no process that exited by itself, some processes killed, exit 0. The stores are removed then
 * (a run keeps them, and says where, only when something failed).
 */
export const expectClean = (dir: string, run: ChaosRun, events: number) => {
  expect(run.result.details, run.stderr).toEqual([])
  expect(run.result).toMatchObject({
    events,
    acked: events,
    lost: 0,
    duplicates: 0,
    orderViolations: 0,
    inconsistencies: 0,
    unexpectedExits: 0,
    stalled: false,
    ok: true
  })
  expect(run.result.kills).toBeGreaterThan(0)
  expect(run.summary).toMatch(new RegExp(`^kills=[1-9]\\d* events=${events} acked=${events} lost=0 duplicates=0 order_violations=0 inconsistencies=0 `))
  expect(run.exitCode).toBe(0)
  fs.rmSync(dir, { recursive: true, force: true })
}
