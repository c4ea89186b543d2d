/**
 * `npm run chaos` — SIGKILL chaos over real worker processes (see run.ts).
 *
 *   npm run chaos                                   # the long run: 4 workers, 20 × 1000 events, 1000 kills
 *   npm run chaos -- --workers 3 --flows 6 --events 40 --kills 30   # the short run of the test suite
 *   npm run chaos -- --pg --claims exact --workers 4 --flows 20 --events 1000 --kills 200 --terminations 40 --restarts 2
 *   npm run chaos -- --daemon 4 …                 # each worker process runs Relay.run({ workers: 4 }) (group commit)
 *
 * Flags: --workers K --flows F --events E --kills N --seed S --retry-rate R --gap-rate G
 * --pause-rate P --lease-ms L --clock strict|clamp --daemon N --dir DIR --keep --quiet --json (adds a
 * JSON result line). --daemon N: every worker process runs the daemon, `Relay.run({ workers: N,
 * batchSize: 1 })`, whose N worker fibers share their transactions (group commit), instead of
 * `Relay.step` in a loop.
 *
 * --pg puts the queue on PostgreSQL (`PgRelayQueue`, the server's clock; the receiver stays on
 * SQLite): a throwaway database on the server of FAIR_RELAY_PG_URL (default
 * postgres://postgres@127.0.0.1:5432/postgres), dropped at the end unless --keep or a violation.
 * With it: --claims exact|parallel (default parallel); --terminations N (default kills / 5): how
 * often to end every relay backend of the run's database with pg_terminate_backend, spread over
 * the run like the kills; --restarts N (default 1): server restarts mid-run with `pg_ctlcluster
 * --skip-systemctl-redirect <version> main restart` (skipped, with a message on stderr, when
 * pg_ctlcluster is missing).
 *
 * Prints one summary line (`kills=… events=… acked=… lost=0 duplicates=0 order_violations=0 …
 * respawns=… terminations=… restarts=…`) on stdout, progress and violations on stderr, and exits 1
 * on any violation.
 */
import { defaultPgUrl } from "./postgres.js"
import { runChaos } from "./run.js"

const usage = "usage: chaos [--workers K] [--flows F] [--events E] [--kills N] [--seed S] [--retry-rate R] [--gap-rate G] " +
  "[--pause-rate P] [--lease-ms L] [--clock strict|clamp] [--daemon N] [--dir DIR] [--keep] [--quiet] [--json] " +
  "[--pg [--claims exact|parallel] [--terminations N] [--restarts N]]"

const parse = (argv: ReadonlyArray<string>) => {
  const numbers: Record<string, number> = {}
  const flags = new Set<string>()
  let dir: string | undefined
  let clock: "strict" | "clamp" | undefined
  let claims: "exact" | "parallel" | undefined
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--keep" || arg === "--quiet" || arg === "--json" || arg === "--pg") {
      flags.add(arg.slice(2))
    } else if (arg === "--claims") {
      const value = argv[++i]
      if (value !== "exact" && value !== "parallel") throw new Error(`--claims needs exact or parallel\n${usage}`)
      claims = value
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
  const known = ["workers", "flows", "events", "kills", "seed", "retry-rate", "gap-rate", "pause-rate", "lease-ms", "terminations", "restarts", "daemon"]
  for (const key of Object.keys(numbers)) if (!known.includes(key)) throw new Error(`unknown flag --${key}\n${usage}`)
  if (!flags.has("pg") && (claims !== undefined || numbers.terminations !== undefined || numbers.restarts !== undefined)) {
    throw new Error(`--claims, --terminations and --restarts need --pg\n${usage}`)
  }
  return { numbers, flags, dir, clock, claims }
}

const main = async () => {
  const { claims, clock, dir, flags, numbers } = parse(process.argv.slice(2))
  const seed = numbers.seed ?? Math.floor(Math.random() * 2 ** 31)
  const kills = numbers.kills ?? 1000
  const pg = flags.has("pg")
    ? {
      url: process.env.FAIR_RELAY_PG_URL ?? defaultPgUrl,
      claims: claims ?? "parallel",
      terminations: numbers.terminations ?? Math.round(kills / 5),
      restarts: numbers.restarts ?? 1
    }
    : undefined
  const options = {
    workers: numbers.workers ?? 4,
    flows: numbers.flows ?? 20,
    events: numbers.events ?? 1000,
    kills,
    seed,
    retryRate: numbers["retry-rate"],
    gapRate: numbers["gap-rate"],
    pauseRate: numbers["pause-rate"],
    leaseMs: numbers["lease-ms"],
    daemon: numbers.daemon,
    clock,
    dir,
    keep: flags.has("keep"),
    pg,
    log: flags.has("quiet") ? undefined : (line: string) => process.stderr.write(`chaos: ${line}\n`)
  }
  if (options.workers < 1 || options.flows < 1 || options.events < 1 || options.kills < 0) throw new Error(usage)
  if (options.daemon !== undefined && !(Number.isInteger(options.daemon) && options.daemon >= 1)) throw new Error(`--daemon needs a whole number ≥ 1\n${usage}`)
  if (pg && (pg.terminations < 0 || pg.restarts < 0)) throw new Error(usage)
  const server = pg ? `, PostgreSQL (${pg.claims} claims), ${pg.terminations} terminations, ${pg.restarts} server restarts` : ""
  process.stderr.write(
    `chaos: ${options.workers} workers${options.daemon === undefined ? "" : ` (daemons of ${options.daemon})`}, ${options.flows} flows × ${options.events} events, ${options.kills} kills${server}, ` +
      `clock ${options.clock ?? "strict"}, seed ${seed}\n`
  )
  const result = await runChaos(options)
  for (const line of result.details) process.stderr.write(`chaos: VIOLATION ${line}\n`)
  if (!result.ok || options.keep) {
    process.stderr.write(`chaos: stores kept in ${result.dir}${result.database ? ` and database ${result.database}` : ""}\n`)
  }
  if (flags.has("json")) process.stdout.write(`${JSON.stringify({ type: "result", result })}\n`)
  process.stdout.write(`${result.summary}\n`)
  process.exitCode = result.ok ? 0 : 1
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exitCode = 2
})
