/**
 * The inspector's CPU profiler around one part of a run (no module loading, no setup), for the
 * diagnosis scripts; summarize what it writes with `npx tsx bench/profile.ts --summarize FILE`.
 */
import * as fs from "node:fs"
import * as inspector from "node:inspector"
import * as path from "node:path"

/** Starts sampling every 200 µs; `stop(file)` writes the profile there and ends the session. */
export const startCpuProfile = async () => {
  const session = new inspector.Session()
  session.connect()
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result))))
  await post("Profiler.enable")
  await post("Profiler.setSamplingInterval", { interval: 200 })
  await post("Profiler.start")
  return {
    stop: async (file: string) => {
      const { profile } = (await post("Profiler.stop")) as { profile: unknown }
      session.disconnect()
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, JSON.stringify(profile))
    }
  }
}
