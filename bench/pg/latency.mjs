// A TCP proxy in front of PostgreSQL that holds every chunk `delay` ms in each direction, in order:
// the database a network hop away, on one machine (this VM has no `tc netem`). Node's timers make
// the least delay about 1 ms each way. For experiments, not part of `npm run bench`:
//
//   node bench/pg/latency.mjs [listen 6543] [target 5432] [delay ms 1]
//   npm run bench -- --pg --latency-ms 1   the PostgreSQL bench through one started on a free port
//   npx tsx bench/pg/ab.ts /tmp/base --url postgres://postgres@127.0.0.1:6543/postgres
import net from "node:net"

const [listen, target, delay] = [Number(process.argv[2] ?? 6543), Number(process.argv[3] ?? 5432), Number(process.argv[4] ?? 1)]

/** Forwards what `from` sends to `to`, each chunk `delay` ms after it arrived. */
const delayed = (from, to) => {
  const queue = []
  let timer
  const flush = () => {
    timer = undefined
    const now = performance.now()
    while (queue.length > 0 && queue[0][0] <= now) to.write(queue.shift()[1])
    if (queue.length > 0) timer = setTimeout(flush, queue[0][0] - now)
  }
  from.on("data", (chunk) => {
    queue.push([performance.now() + delay, chunk])
    if (timer === undefined) timer = setTimeout(flush, delay)
  })
  from.on("close", () => to.destroy())
  from.on("error", () => to.destroy())
}

const proxy = net.createServer((client) => {
  const server = net.connect(target, "127.0.0.1")
  client.setNoDelay(true)
  server.setNoDelay(true)
  delayed(client, server)
  delayed(server, client)
})
// Port 0: any free port. The line says which, as a message of a child of `scenarios/processes/spawn.ts`
// (`npm run bench -- --pg --latency-ms N` waits for it).
proxy.listen(listen, "127.0.0.1", () =>
  console.log(JSON.stringify({ type: "listening", port: proxy.address().port, target, delayMs: delay })))
