/**
 * What a receiver's oversized reply costs a worker: a plain HTTP server answers every delivery
 * with `--mb` megabytes (default 100), streamed as fast as the worker reads; a worker process
 * (this script with `child`) delivers `--deliveries` events to it through `HttpTransport` and
 * reports its RSS before the first big reply and its peak after the last.
 *
 *   npx tsx bench/bigReply.ts [--mb 100] [--deliveries 5] [--declared] [--json FILE]
 *
 * `--declared` sends a Content-Length (the transport then refuses before reading); without it the
 * reply is chunked, and the transport counts while it reads.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { Effect } from "effect"
import { fork } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { fileURLToPath } from "node:url"
import * as HttpTransport from "../src/http/HttpTransport.js"

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? undefined : process.argv[i + 1]
}

const secret = `whsec_${Buffer.alloc(32, 1).toString("base64")}`
const megabytes = () => process.memoryUsage().rss / (1024 * 1024)

/** The worker: one small delivery to load everything, then the big ones; RSS around them. */
const child = async (url: string, deliveries: number) => {
  const result = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const transport = yield* HttpTransport.make({ url, secrets: secret, timeout: "60 seconds" })
    const warm = yield* transport.deliver({ eventId: "warm", flowId: "W", seq: 1, body: { small: true } })
    global.gc?.()
    const baselineRssMB = megabytes()
    const replies = []
    const started = Date.now()
    for (let i = 1; i <= deliveries; i++) replies.push(yield* transport.deliver({ eventId: `big-${i}`, flowId: "B", seq: i, body: { i } }))
    return {
      warm,
      replies,
      baselineRssMB,
      afterRssMB: megabytes(),
      peakRssMB: process.resourceUsage().maxRSS / 1024,
      millis: Date.now() - started
    }
  }).pipe(Effect.provide(NodeHttpClient.layerUndici))))
  process.send!(result)
}

const parent = async () => {
  const mb = Number(arg("mb") ?? 100)
  const deliveries = Number(arg("deliveries") ?? 5)
  const declared = process.argv.includes("--declared")
  const total = mb * 1024 * 1024
  const chunk = Buffer.alloc(64 * 1024, 0x78)
  const written: Array<number> = []
  const server = http.createServer((request, response) => {
    request.resume()
    request.on("end", () => {
      if (request.headers["webhook-id"] === "warm") return void response.writeHead(204).end()
      response.writeHead(200, { "content-type": "application/json", ...(declared ? { "content-length": String(total) } : {}) })
      let sent = 0
      response.on("close", () => written.push(sent))
      const pump = () => {
        while (sent < total && !response.destroyed) {
          sent += chunk.length
          if (!response.write(chunk)) return void response.once("drain", pump)
        }
        if (sent >= total) response.end()
      }
      pump()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`
  const worker = fork(fileURLToPath(import.meta.url), ["child", url, String(deliveries)], {
    execArgv: [...process.execArgv, "--expose-gc"]
  })
  const result = await new Promise<Record<string, unknown>>((resolve, reject) => {
    worker.on("message", (message) => resolve(message as Record<string, unknown>))
    worker.on("exit", (code) => reject(new Error(`the worker exited with ${code} before reporting`)))
  })
  worker.kill()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  const report = {
    replyMB: mb,
    declaredLength: declared,
    deliveries,
    ...result,
    growthMB: (result.peakRssMB as number) - (result.baselineRssMB as number),
    bytesTheServerGotOutPerReply: written
  }
  console.log(JSON.stringify(report, null, 2))
  const json = arg("json")
  if (json !== undefined) fs.writeFileSync(json, `${JSON.stringify({ at: new Date().toISOString(), node: process.version, ...report }, null, 2)}\n`)
}

if (process.argv[2] === "child") await child(process.argv[3]!, Number(process.argv[4]))
else await parent()
