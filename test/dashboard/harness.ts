/**
 * A dashboard served on a real port over a fresh SQLite store, for the browser tests and the
 * screenshot and first-paint scripts; and the Chromium they drive (Debian's, via playwright-core).
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Dashboard from "../../src/dashboard/Dashboard.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { fill, policy } from "./fixture.js"
import { testTmpDir } from "../support/tmp.js"

/** Where the browser tests expect Chromium (Debian's `chromium` package). */
export const chromiumPath = process.env.FAIR_RELAY_CHROMIUM ?? "/usr/bin/chromium"

/** Whether Chromium is installed. */
export const hasChromium = fs.existsSync(chromiumPath)

/** Launch options for playwright-core's `chromium.launch`. */
export const launchOptions = { executablePath: chromiumPath, args: ["--no-sandbox"], headless: true }

/** A running dashboard. */
export interface Served {
  readonly url: string
  readonly queue: RelayQueueService
  readonly run: <A, E>(effect: Effect.Effect<A, E, RelayQueue>) => Promise<A>
  readonly close: () => Promise<void>
}

/** Serves the dashboard over a fresh store filled with the fixture (and `prepare`'s additions). */
export const serve = async (
  options: Dashboard.ServerOptions & {
    readonly prepare?: Effect.Effect<void, unknown, RelayQueue>
    /** Built before the server (a logger that keeps its logs, say). */
    readonly before?: Layer.Layer<never>
  } = {}
): Promise<Served> => {
  const dir = fs.mkdtempSync(path.join(testTmpDir(), "fair-relay-dashboard-"))
  const { before, prepare, ...dashboard } = options
  const QueueLive = SqliteRelayQueue.layer({ filename: path.join(dir, "queue.db"), policy })
  const Filled = Layer.effectDiscard(Effect.andThen(fill, prepare ?? Effect.void)).pipe(Layer.provideMerge(QueueLive))
  const server = Layer.provideMerge(Dashboard.layerServer(dashboard), Filled)
  const runtime = ManagedRuntime.make(before === undefined ? server : Layer.provide(server, before))
  const url = await runtime.runPromise(Dashboard.url)
  const queue = await runtime.runPromise(RelayQueue)
  return {
    url,
    queue,
    run: (effect) => runtime.runPromise(effect),
    close: async () => {
      await runtime.dispose()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
