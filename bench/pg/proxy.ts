/**
 * Starting `bench/pg/latency.mjs` from a bench: the database a network hop away on one machine
 * (`npm run bench -- --pg --latency-ms N`, `bench/pg/wakeups.ts`).
 */
import { fileURLToPath } from "node:url"
import { spawnChild } from "../../scenarios/processes/spawn.js"
import type { Child } from "../../scenarios/processes/spawn.js"

/**
 * `bench/pg/latency.mjs` in front of the server of `url` (on this machine), on a free port, holding
 * each chunk `delayMs` each way: the URL through it and its process, or why it could not start.
 */
export const startProxy = async (url: string, delayMs: number): Promise<{ readonly url: string; readonly process: Child } | string> => {
  const server = new URL(url)
  if (!["127.0.0.1", "localhost"].includes(server.hostname)) return `--latency-ms needs a server on this machine (127.0.0.1), got ${server.hostname}`
  const child = spawnChild(fileURLToPath(new URL("./latency.mjs", import.meta.url)), ["0", server.port === "" ? "5432" : server.port, String(delayMs)])
  const listening = await child.expect("listening", 10_000).catch((error: unknown) => error as Error)
  if (listening instanceof Error) {
    child.kill()
    return `the latency proxy (bench/pg/latency.mjs) did not start: ${listening.message}`
  }
  const proxied = new URL(url)
  proxied.hostname = "127.0.0.1"
  proxied.port = String(listening.port)
  return { url: proxied.toString(), process: child }
}
