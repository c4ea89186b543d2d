/**
 * A scripted receiver: a bare `node:http` server on 127.0.0.1 (port 0) that answers whatever the
 * test says — a status, garbage, silence, a dropped socket — and records what it was sent.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as Http from "node:http"
import type { AddressInfo, Socket } from "node:net"

/** One request as the server received it. */
export interface Recorded {
  readonly method: string
  readonly url: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

/** How the server answers a request (after reading its whole body). */
export type Script = (request: Recorded, response: Http.ServerResponse, socket: Socket) => void

/** A running scripted server. */
export interface Scripted {
  readonly url: string
  readonly requests: ReadonlyArray<Recorded>
}

const listen = (server: Http.Server) =>
  Effect.async<number>((resume) => {
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
  })

// Hanging exchanges would keep `close` waiting: drop every connection first.
const close = (server: Http.Server) =>
  Effect.async<void>((resume) => {
    server.closeAllConnections()
    server.close(() => resume(Effect.void))
  })

/** Starts a scripted server for the scope; it is closed (connections dropped) at the end. */
export const scripted = (script: Script, path = "/deliveries"): Effect.Effect<Scripted, never, Scope.Scope> =>
  Effect.gen(function*() {
    const requests: Array<Recorded> = []
    const server = yield* Effect.acquireRelease(
      Effect.sync(() =>
        Http.createServer((req, res) => {
          const chunks: Array<Buffer> = []
          req.on("data", (chunk: Buffer) => chunks.push(chunk))
          req.on("end", () => {
            const recorded = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") }
            requests.push(recorded)
            script(recorded, res, req.socket)
          })
        })
      ),
      close
    )
    const port = yield* listen(server)
    return { url: `http://127.0.0.1:${port}${path}`, requests }
  })

/** Answers `status` with `body` as it is (no JSON encoding). */
export const answer = (status: number, body: string, headers: Http.OutgoingHttpHeaders = { "content-type": "application/json" }): Script =>
  (_request, response) => {
    response.writeHead(status, headers)
    response.end(body)
  }

/** Answers `status` with `body` as a fair-relay reply (its media type), so the transport reads the document. */
export const answerReply = (status: number, body: string, headers: Http.OutgoingHttpHeaders = {}): Script =>
  answer(status, body, { "content-type": "application/vnd.fair-relay.reply+json", ...headers })

/** A loopback URL on which nothing listens: a port just bound and released. */
export const closedPort: Effect.Effect<string> = Effect.gen(function*() {
  const server = Http.createServer()
  const port = yield* listen(server)
  yield* close(server)
  return `http://127.0.0.1:${port}/deliveries`
})
