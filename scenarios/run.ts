/**
 * Runs demo scenarios, each in a directory of its own under a logical clock starting at tick 0.
 */
import { Cause, Effect, Exit } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as TickClock from "../src/services/TickClock.js"
import { catalog } from "./catalog.js"
import { makeContext } from "./Scenario.js"
import type { Check, Report } from "./Scenario.js"

/** The result of one scenario. */
export interface Result {
  readonly number: number
  readonly name: string
  readonly title: string
  readonly ok: boolean
  readonly lines: ReadonlyArray<string>
  readonly checks: ReadonlyArray<Check>
  readonly facts: Record<string, unknown>
  readonly error?: string
}

/** Runs the catalog (or one scenario of it) under `dir`. */
export const runAll = async (options: { readonly dir: string; readonly only?: string | undefined }): Promise<Array<Result>> => {
  const results: Array<Result> = []
  for (const [number, scenario] of catalog) {
    if (options.only !== undefined && scenario.name !== options.only) continue
    const dir = path.join(options.dir, scenario.name)
    fs.mkdirSync(dir, { recursive: true })
    const report: Report = { lines: [], checks: [], facts: {} }
    const clock = TickClock.make(0)
    const exit = await Effect.runPromiseExit(
      Effect.scoped(scenario.run(makeContext(dir, clock.set, report))).pipe(Effect.withClock(clock.clock))
    )
    const error = Exit.isFailure(exit) ? Cause.pretty(exit.cause).split("\n")[0] : undefined
    results.push({
      number,
      name: scenario.name,
      title: scenario.title,
      ok: error === undefined && report.checks.length > 0 && report.checks.every((c) => c.ok),
      lines: report.lines,
      checks: report.checks,
      facts: report.facts,
      ...(error === undefined ? {} : { error })
    })
  }
  return results
}
