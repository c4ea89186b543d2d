/**
 * The end-to-end HTTP scenario: worker processes over one SQLite queue file deliver over HTTP to
 * a receiver in the parent that answers `Retry` or `Gap` part of the time.
 */
import type { PolicyInput } from "../../src/domain/Policy.js"
import { childScript, spawnChild, withChildren } from "./spawn.js"

/** Real time: a lease far longer than a delivery, short backoffs, and a budget no flaky run exhausts. */
export const e2ePolicy: PolicyInput = {
  leaseTicks: "20 seconds",
  backoffBase: "5 millis",
  backoffCap: "100 millis",
  retryBudget: 10_000
}

/** The signing secret the scenario's workers and receiver share (a fixed test key, `whsec_<base64>`). */
export const e2eSecret = `whsec_${Buffer.alloc(32, 0x5a).toString("base64")}`

/**
 * Starts `processes` worker processes (each with `workers` fibers) against `queueFile` and `url`,
 * runs `until` while they work, then stops them gracefully and returns their exit codes.
 */
export const withHttpWorkers = async <A>(
  options: { readonly queueFile: string; readonly url: string; readonly processes: number; readonly workers: number },
  until: () => Promise<A>
): Promise<{ readonly result: A; readonly exitCodes: ReadonlyArray<number | null>; readonly logs: ReadonlyArray<string> }> => {
  const children = Array.from(
    { length: options.processes },
    () => spawnChild(childScript("httpWorkerChild.ts"), [options.queueFile, options.url, String(options.workers)])
  )
  return withChildren(children, async () => {
    await Promise.all(children.map((child) => child.expect("running")))
    const result = await until()
    for (const child of children) child.end()
    const exits = await Promise.all(children.map((child) => child.exit))
    return { result, exitCodes: exits.map((e) => e.code), logs: children.flatMap((c) => [...c.noise(), c.stderr()]) }
  })
}
