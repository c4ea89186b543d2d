/**
 * The inspector's CPU profiler, and its sampling heap profiler, around one part of a run (no
 * module loading, no setup), for the diagnosis scripts; summarize what the CPU profiler writes with
 * `npx tsx bench/profile.ts --summarize FILE`.
 */
import * as fs from "node:fs"
import * as inspector from "node:inspector"
import * as path from "node:path"

/** A session with this process's inspector, and its `post` as a promise. */
const connect = () => {
  const session = new inspector.Session()
  session.connect()
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result))))
  return { post, disconnect: () => session.disconnect() }
}

/** Starts sampling every 200 µs; `stop(file)` writes the profile there and ends the session. */
export const startCpuProfile = async () => {
  const { disconnect, post } = connect()
  await post("Profiler.enable")
  await post("Profiler.setSamplingInterval", { interval: 200 })
  await post("Profiler.start")
  return {
    stop: async (file: string) => {
      const { profile } = (await post("Profiler.stop")) as { profile: unknown }
      disconnect()
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, JSON.stringify(profile))
    }
  }
}

/** A node of the inspector's sampling heap profile. */
interface AllocationNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly selfSize: number
  readonly children: ReadonlyArray<AllocationNode>
}

/**
 * The inspector's sampling heap profiler around one part of a run, counting every allocation
 * sampled (one per 1 KiB on average), those the collector has since freed included — how much a
 * step allocates, where the collector's work comes from. `stop(units)` answers the bytes per unit
 * and the allocation sites that allocate most per unit (function, file and line).
 */
export const startAllocationProfile = async (options: { readonly promoted?: boolean } = {}) => {
  const { disconnect, post } = connect()
  await post("HeapProfiler.enable")
  await post("HeapProfiler.startSampling", {
    samplingInterval: 1024,
    includeObjectsCollectedByMajorGC: true,
    // With `promoted`, what the young generation's collections freed is left out: what remains
    // is what outlived them (promoted to the old generation), the major collector's work.
    includeObjectsCollectedByMinorGC: options.promoted !== true
  })
  return {
    stop: async (units: number, top = 15) => {
      const { profile } = (await post("HeapProfiler.stopSampling")) as { profile: { head: AllocationNode } }
      disconnect()
      const bySite = new Map<string, number>()
      let total = 0
      const frameOf = ({ functionName, lineNumber, url }: AllocationNode["callFrame"]) =>
        `${functionName || "(anonymous)"} ${url.replace(/^.*node_modules\//, "").replace(/^.*\/(src|dist|bench)\//, "$1/")}:${lineNumber + 1}`
      const isOurs = (url: string) => /\/(src|dist)\//.test(url) && !url.includes("node_modules")
      // A site is its frame and, where that is not ours, the nearest of our frames that called it.
      const walk = (node: AllocationNode, ours: string | undefined) => {
        const frame = frameOf(node.callFrame)
        const site = isOurs(node.callFrame.url) || ours === undefined ? frame : `${frame} ← ${ours}`
        total += node.selfSize
        bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize)
        for (const child of node.children) walk(child, isOurs(node.callFrame.url) ? frame : ours)
      }
      walk(profile.head, undefined)
      return {
        /** What the bytes are, for a report's line. */
        what: options.promoted === true ? "promoted (outlived the young generation's collections)" : "allocated",
        bytesPerUnit: total / units,
        sites: [...bySite].sort((a, b) => b[1] - a[1]).slice(0, top).map(([site, bytes]) => ({ site, bytesPerUnit: bytes / units }))
      }
    }
  }
}

/** A report's lines for what `startAllocationProfile`'s `stop` answered, per `unit` ("event", "step"). */
export const allocationLines = (
  counted: Awaited<ReturnType<Awaited<ReturnType<typeof startAllocationProfile>>["stop"]>>,
  unit: string
): ReadonlyArray<string> => [
  `${counted.what} per ${unit}: ${(counted.bytesPerUnit / 1024).toFixed(1)} KiB; most by site (KiB per ${unit}):`,
  ...counted.sites.map(({ bytesPerUnit, site }) => `  ${(bytesPerUnit / 1024).toFixed(2).padStart(6)}  ${site}`)
]
