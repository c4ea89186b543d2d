/**
 * `npm run chaos` — SIGKILL chaos over real worker processes (see run.ts).
 *
 *   npm run chaos                                   # the long run: 4 workers, 20 × 1000 events, 1000 kills
 *   npm run chaos -- --workers 3 --flows 6 --events 40 --kills 30   # the short run of the test suite
 *
 * Flags: --workers K --flows F --events E --kills N --seed S --retry-rate R --gap-rate G
 * --pause-rate P --lease-ms L --clock strict|clamp --dir DIR --keep --quiet --json (adds a JSON
 * result line).
 *
 * Prints one summary line (`kills=… events=… acked=… lost=0 duplicates=0 order_violations=0 …`)
 * on stdout, progress and violations on stderr, and exits 1 on any violation.
 */
import { runChaos } from "./run.js"

const usage = "usage: chaos [--workers K] [--flows F] [--events E] [--kills N] [--seed S] [--retry-rate R] [--gap-rate G] " +
  "[--pause-rate P] [--lease-ms L] [--clock strict|clamp] [--dir DIR] [--keep] [--quiet] [--json]"

const parse = (argv: ReadonlyArray<string>) => {
  const numbers: Record<string, number> = {}
  const flags = new Set<string>()
  let dir: string | undefined
  let clock: "strict" | "clamp" | undefined
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--keep" || arg === "--quiet" || arg === "--json") {
      flags.add(arg.slice(2))
    } else if (arg === "--dir") {
      dir = argv[++i]
    } else if (arg === "--clock") {
      const value = argv[++i]
      if (value !== "strict" && value !== "clamp") throw new Error(`--clock needs strict or clamp\n${usage}`)
      clock = value
    } else if (arg.startsWith("--")) {
      const value = Number(argv[++i])
      if (!Number.isFinite(value)) throw new Error(`${arg} needs a number\n${usage}`)
      numbers[arg.slice(2)] = value
    } else {
      throw new Error(`unknown argument ${arg}\n${usage}`)
    }
  }
  const known = ["workers", "flows", "events", "kills", "seed", "retry-rate", "gap-rate", "pause-rate", "lease-ms"]
  for (const key of Object.keys(numbers)) if (!known.includes(key)) throw new Error(`unknown flag --${key}\n${usage}`)
  return { numbers, flags, dir, clock }
}

const main = async () => {
  const { clock, dir, flags, numbers } = parse(process.argv.slice(2))
  const seed = numbers.seed ?? Math.floor(Math.random() * 2 ** 31)
  const options = {
    workers: numbers.workers ?? 4,
    flows: numbers.flows ?? 20,
    events: numbers.events ?? 1000,
    kills: numbers.kills ?? 1000,
    seed,
    retryRate: numbers["retry-rate"],
    gapRate: numbers["gap-rate"],
    pauseRate: numbers["pause-rate"],
    leaseMs: numbers["lease-ms"],
    clock,
    dir,
    keep: flags.has("keep"),
    log: flags.has("quiet") ? undefined : (line: string) => process.stderr.write(`chaos: ${line}\n`)
  }
  if (options.workers < 1 || options.flows < 1 || options.events < 1 || options.kills < 0) throw new Error(usage)
  process.stderr.write(
    `chaos: ${options.workers} workers, ${options.flows} flows × ${options.events} events, ${options.kills} kills, ` +
      `clock ${options.clock ?? "strict"}, seed ${seed}\n`
  )
  const result = await runChaos(options)
  for (const line of result.details) process.stderr.write(`chaos: VIOLATION ${line}\n`)
  if (!result.ok || options.keep) process.stderr.write(`chaos: stores kept in ${result.dir}\n`)
  if (flags.has("json")) process.stdout.write(`${JSON.stringify({ type: "result", result })}\n`)
  process.stdout.write(`${result.summary}\n`)
  process.exitCode = result.ok ? 0 : 1
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exitCode = 2
})
