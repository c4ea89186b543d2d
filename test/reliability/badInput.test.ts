/**
 * The bad-input catalogue: every public entry point called with malformed arguments — wrong
 * types, empty / oversize / control-character ids, non-JSON bodies, huge numbers, forged or
 * foreign tokens, replies with unknown tags — and store paths that are not ours (not a SQLite
 * file, another application's SQLite file, a store written by a newer schema version).
 *
 * Each case runs on a fresh copy of a template queue file and receiver file holding every kind of
 * state (acked, ready, in flight, quarantined; a receipt and an effect). Each must end in a typed
 * error (or, for a well-formed but forged token, the protocol's `Stale`), and a byte comparison
 * of the directory's files (taken with the stores closed) must show nothing changed.
 *
 * (Written first as known gaps: lone surrogates, throwing getters and proxies, deeply nested
 * arguments, huge batch errors, foreign / other-kind / newer stores and invalid busy timeouts
 * were accepted or crashed; src refuses them all since commit deb14c9.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import Database from "better-sqlite3"
import { Cause, Effect, Exit, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { Inbox } from "../../src/services/Inbox.js"
import type { InboxService } from "../../src/services/Inbox.js"
import * as Relay from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import * as TickClock from "../../src/services/TickClock.js"
import { Transport } from "../../src/services/Transport.js"
import * as Transports from "../../src/services/Transport.js"
import type { Files } from "./support/stores.js"
import {
  changedFiles,
  copyTemplate,
  execOn,
  filesIn,
  filesOf,
  inboxBusiness,
  latestMigration,
  makeDir,
  openStores,
  TemplateTick,
  writeTemplate
} from "./support/stores.js"

interface Services {
  readonly queue: RelayQueueService
  readonly inbox: InboxService
  readonly relay: Relay.RelayService
}

interface Case {
  readonly what: string
  readonly call: (s: Services) => Effect.Effect<unknown, unknown>
  /** The error tag expected; or `outcome` for a call that must succeed without changing anything. */
  readonly error?: string
  readonly outcome?: unknown
  /** What the error message must name (the field or value at fault). */
  readonly mentions?: RegExp
}

// ---- values ----------------------------------------------------------------------------------

const cyclic: Record<string, unknown> = { delta: 1 }
cyclic.self = cyclic
let deep: unknown = { delta: 1 }
for (let i = 0; i < 100_000; i++) deep = [deep]
let deepArgument: unknown = 1
for (let i = 0; i < 3_000; i++) deepArgument = [deepArgument]
let deepId: unknown = "A9"
for (let i = 0; i < 3_000; i++) deepId = { id: deepId }
const throwingGetter = Object.defineProperty({}, "delta", { enumerable: true, get: () => { throw new Error("getter exploded") } })
const throwingProxy = new Proxy({}, { ownKeys: () => { throw new Error("proxy exploded") } })
class Money {
  constructor(readonly cents: number) {}
}

const badIds: ReadonlyArray<readonly [string, unknown]> = [
  ["a missing id", undefined],
  ["a number as id", 42],
  ["an object as id", { id: "A9" }],
  ["an empty id", ""],
  ["a blank id", "   "],
  ["an id of 201 characters", "x".repeat(201)],
  ["an id of 10,000,000 characters", "x".repeat(10_000_000)],
  ["an id with a newline", "A\n9"],
  ["an id with a NUL", "A\u00009"],
  ["an id with DEL", "A\u007f9"],
  ["an id with a C1 control (NEL)", "A\u00859"],
  ["an id with an ANSI escape", "\u001b[31mA9"],
  // A lone surrogate has no UTF-8 form: stored, it would read back as U+FFFD, another id.
  ["an id with a lone high surrogate", "A\uD8009"],
  ["an id with a lone low surrogate", "A\uDC009"]
]

const badBodies: ReadonlyArray<readonly [string, unknown]> = [
  ["a function", () => 1],
  ["a symbol", Symbol("s")],
  ["a bigint", { delta: 1n }],
  ["NaN", { delta: Number.NaN }],
  ["Infinity", { delta: Number.POSITIVE_INFINITY }],
  ["-Infinity", { delta: Number.NEGATIVE_INFINITY }],
  ["undefined", undefined],
  ["a nested undefined", { delta: 1, note: undefined }],
  ["a Date", { at: new Date(0) }],
  ["a Map", new Map([["delta", 1]])],
  ["a class instance", new Money(5)],
  ["a Uint8Array", new Uint8Array([1, 2])],
  ["a cycle", cyclic],
  ["a sparse array", [1, , 3]], // eslint-disable-line no-sparse-arrays
  ["100,000 levels of nesting", deep],
  ["2 MiB of text (over the 1 MiB limit)", { s: "y".repeat(2 * 1024 * 1024) }],
  ["a getter that throws", throwingGetter],
  ["a proxy that throws", throwingProxy]
]

const badIntegers: ReadonlyArray<readonly [string, unknown]> = [
  ["-1", -1],
  ["1.5", 1.5],
  ["NaN", Number.NaN],
  ["Infinity", Number.POSITIVE_INFINITY],
  ["2^53 + 2 (not a safe integer)", 2 ** 53 + 2],
  ["1e300", 1e300],
  ["the string \"1\"", "1"],
  ["null", null]
]

const C1 = { eventId: "C1", generation: 1 } // the template's live token

const badReplies: ReadonlyArray<readonly [string, unknown]> = [
  ["null", null],
  ["undefined", undefined],
  ["a bare string", "Accepted"],
  ["an object without a tag", {}],
  ["a lower-case tag", { _tag: "accepted" }],
  ["an unknown tag", { _tag: "Ack" }],
  ["another unknown tag", { _tag: "Success" }],
  ["a __proto__ tag", { _tag: "__proto__" }],
  ["Retry without a reason", { _tag: "Retry" }],
  ["Retry with a numeric reason", { _tag: "Retry", reason: 5 }],
  ["Retry{retryAfter: -1}", { _tag: "Retry", reason: "busy", retryAfter: -1 }],
  ["Retry{retryAfter: 1.5}", { _tag: "Retry", reason: "busy", retryAfter: 1.5 }],
  ["Retry{retryAfter: \"2000\"}", { _tag: "Retry", reason: "busy", retryAfter: "2000" }],
  ["Retry{retryAfter: NaN}", { _tag: "Retry", reason: "busy", retryAfter: Number.NaN }],
  ["Retry{retryAfter: 1e300}", { _tag: "Retry", reason: "busy", retryAfter: 1e300 }],
  ["Rejected without a code", { _tag: "Rejected" }],
  ["Rejected with a null code", { _tag: "Rejected", code: null }],
  ["Gap without expected", { _tag: "Gap" }],
  ["Gap{expected: 0}", { _tag: "Gap", expected: 0 }],
  ["Gap{expected: -1}", { _tag: "Gap", expected: -1 }],
  ["Gap{expected: 1.5}", { _tag: "Gap", expected: 1.5 }],
  ["Gap{expected: \"2\"}", { _tag: "Gap", expected: "2" }],
  ["Gap{expected: NaN}", { _tag: "Gap", expected: Number.NaN }],
  ["Gap{expected: 1e300}", { _tag: "Gap", expected: 1e300 }]
]

// ---- the catalogue -----------------------------------------------------------------------------

const enqueue = (input: unknown) => (s: Services) => s.queue.enqueue(input as never)

const cases: ReadonlyArray<Case> = [
  // enqueue: the input itself
  { what: "enqueue(null)", call: enqueue(null), error: "InvalidInput" },
  { what: "enqueue(\"A9\")", call: enqueue("A9"), error: "InvalidInput" },
  { what: "enqueue([])", call: enqueue([]), error: "InvalidInput" },
  { what: "enqueue of an array nested 3,000 levels deep", call: enqueue(deepArgument), error: "InvalidInput" },
  {
    what: "enqueue with an event id that is an object nested 3,000 levels deep",
    call: enqueue({ eventId: deepId, flowId: "A", body: {} }),
    error: "InvalidInput"
  },
  {
    what: "enqueue with an event id getter that throws",
    call: enqueue({ get eventId(): string { throw new Error("getter exploded") }, flowId: "A", body: {} }),
    error: "InvalidInput"
  },
  // enqueue: ids
  ...badIds.flatMap(([what, id]): Array<Case> => [
    {
      what: `enqueue with ${what} as event id`,
      call: enqueue({ eventId: id, flowId: "A", body: { delta: 1 } }),
      error: "InvalidInput",
      mentions: /eventId/
    },
    {
      what: `enqueue with ${what} as flow id`,
      call: enqueue({ eventId: "A9", flowId: id, body: { delta: 1 } }),
      error: "InvalidInput",
      mentions: /flowId/
    }
  ]),
  // enqueue: bodies
  ...badBodies.map(([what, body]): Case => ({
    what: `enqueue with a body holding ${what}`,
    call: enqueue({ eventId: "A9", flowId: "A", body }),
    error: "InvalidInput",
    mentions: /body/
  })),
  // enqueue: weights
  ...[...badIntegers, ["0", 0] as const, ["1,000,001", 1_000_001] as const].map(([what, weight]): Case => ({
    what: `enqueue with weight ${what}`,
    call: enqueue({ eventId: "A9", flowId: "A", body: { delta: 1 }, weight }),
    error: "InvalidInput",
    mentions: /weight/
  })),
  // enqueue: a stored id with another body or flow
  { what: "enqueue of A1 with another body", call: enqueue({ eventId: "A1", flowId: "A", body: { delta: 9 } }), error: "EnqueueConflict" },
  { what: "enqueue of A1 into another flow", call: enqueue({ eventId: "A1", flowId: "B", body: { delta: 1 } }), error: "EnqueueConflict" },

  // enqueueBatch
  { what: "enqueueBatch(null)", call: (s) => s.queue.enqueueBatch(null as never), error: "InvalidInput" },
  { what: "enqueueBatch({})", call: (s) => s.queue.enqueueBatch({} as never), error: "InvalidInput" },
  {
    what: "enqueueBatch of 10,001 items",
    call: (s) =>
      s.queue.enqueueBatch(Array.from({ length: 10_001 }, (_, i) => ({ eventId: `N${i}`, flowId: "N", body: { delta: 1 } }))),
    error: "InvalidInput"
  },
  {
    what: "enqueueBatch whose third item has a control character (the first two are not stored)",
    call: (s) =>
      s.queue.enqueueBatch([
        { eventId: "N1", flowId: "N", body: { delta: 1 } },
        { eventId: "N2", flowId: "N", body: { delta: 1 } },
        { eventId: "N\u00003", flowId: "N", body: { delta: 1 } }
      ]),
    error: "InvalidInput",
    mentions: /item 2/
  },
  {
    what: "enqueueBatch whose second item conflicts with A1 (the first is not stored)",
    call: (s) => s.queue.enqueueBatch([{ eventId: "N1", flowId: "N", body: { delta: 1 } }, { eventId: "A1", flowId: "A", body: { delta: 7 } }]),
    error: "EnqueueConflict"
  },

  // setFlowWeight
  { what: "setFlowWeight(null)", call: (s) => s.queue.setFlowWeight(null as never), error: "InvalidInput" },
  { what: "setFlowWeight with an empty flow id", call: (s) => s.queue.setFlowWeight({ flowId: "", weight: 2 }), error: "InvalidInput" },
  ...[...badIntegers, ["0", 0] as const, ["1,000,001", 1_000_001] as const].map(([what, weight]): Case => ({
    what: `setFlowWeight with weight ${what}`,
    call: (s) => s.queue.setFlowWeight({ flowId: "A", weight: weight as number }),
    error: "InvalidInput",
    mentions: /weight/
  })),

  // claimBatch and the worker's stepBatch
  ...[...badIntegers, ["0", 0] as const, ["10,001", 10_001] as const].flatMap(([what, n]): Array<Case> => [
    { what: `claimBatch(${what})`, call: (s) => s.queue.claimBatch(n as number), error: "InvalidInput" },
    { what: `Relay.stepBatch(${what})`, call: (s) => s.relay.stepBatch(n as number), error: "InvalidInput" }
  ]),

  // settle: malformed tokens (with a well-formed reply)
  ...([
    ["a null token", null],
    ["a string token", "C1"],
    ["an array token", []],
    ["a token without generation", { eventId: "C1" }],
    ["a token without event id", { generation: 1 }],
    ["a token with an empty id", { eventId: "", generation: 1 }],
    ["a token with a 201-character id", { eventId: "x".repeat(201), generation: 1 }],
    ["a token with a newline in its id", { eventId: "C\n1", generation: 1 }],
    ...badIntegers.map(([what, generation]) => [`a token with generation ${what}`, { eventId: "C1", generation }] as const)
  ] as ReadonlyArray<readonly [string, unknown]>).map(([what, token]): Case => ({
    what: `settle with ${what}`,
    call: (s) => s.queue.settle(token as never, { _tag: "Accepted" }),
    error: "InvalidInput"
  })),
  // settle: malformed replies (with the live token)
  ...badReplies.map(([what, reply]): Case => ({
    what: `settle with a reply that is ${what}`,
    call: (s) => s.queue.settle(C1, reply as never),
    error: "InvalidInput"
  })),
  // settle: well-formed tokens that are not the event's current claim — the protocol's Stale.
  ...([
    ["a forged newer generation of C1", { eventId: "C1", generation: 2 }],
    ["an older generation of C1", { eventId: "C1", generation: 0 }],
    ["a replayed token of acked A1", { eventId: "A1", generation: 1 }],
    ["a token of quarantined B1", { eventId: "B1", generation: 1 }],
    ["a ready event's token (A2 was never claimed)", { eventId: "A2", generation: 1 }],
    ["a foreign token (an id this queue never stored)", { eventId: "other-queue:A1", generation: 1 }],
    ["the largest safe generation", { eventId: "C1", generation: Number.MAX_SAFE_INTEGER }]
  ] as const).flatMap(([what, token]): Array<Case> => [
    { what: `settle(Accepted) with ${what}`, call: (s) => s.queue.settle(token, { _tag: "Accepted" }), outcome: { _tag: "Stale" } },
    {
      what: `settle(Rejected) with ${what}`,
      call: (s) => s.queue.settle(token, { _tag: "Rejected", code: "forged" }),
      outcome: { _tag: "Stale" }
    }
  ]),

  // settleBatch
  { what: "settleBatch(null)", call: (s) => s.queue.settleBatch(null as never), error: "InvalidInput" },
  { what: "settleBatch({})", call: (s) => s.queue.settleBatch({} as never), error: "InvalidInput" },
  {
    what: "settleBatch whose second reply has an unknown tag (the first is not applied)",
    call: (s) => s.queue.settleBatch([{ token: C1, reply: { _tag: "Accepted" } }, { token: C1, reply: { _tag: "Nope" } as never }]),
    error: "InvalidInput"
  },
  {
    what: "settleBatch of 10,001 items",
    call: (s) => s.queue.settleBatch(Array.from({ length: 10_001 }, () => ({ token: C1, reply: { _tag: "Accepted" as const } }))),
    error: "InvalidInput"
  },

  // redrive: malformed
  { what: "redrive(null)", call: (s) => s.queue.redrive(null as never), error: "InvalidInput" },
  { what: "redrive with an empty id", call: (s) => s.queue.redrive({ eventId: "", expectedGeneration: 1, reason: "fix" }), error: "InvalidInput" },
  ...badIntegers.map(([what, expectedGeneration]): Case => ({
    what: `redrive with expected generation ${what}`,
    call: (s) => s.queue.redrive({ eventId: "B1", expectedGeneration: expectedGeneration as number, reason: "fix" }),
    error: "InvalidInput",
    mentions: /expectedGeneration/
  })),
  ...([["null", null], ["a number", 5], ["undefined", undefined], ["an object", { text: "fix" }]] as const).map(([what, reason]): Case => ({
    what: `redrive with ${what} as reason`,
    call: (s) => s.queue.redrive({ eventId: "B1", expectedGeneration: 1, reason: reason as never }),
    error: "InvalidInput",
    mentions: /reason/
  })),
  // redrive: the operator's mistakes (typed errors of docs/protocol.md, Redrive)
  ...["", " ", "\t\n", "\u00a0", "\u3000"].map((reason): Case => ({
    what: `redrive with the blank reason ${JSON.stringify(reason)}`,
    call: (s) => s.queue.redrive({ eventId: "B1", expectedGeneration: 1, reason }),
    error: "MissingReason"
  })),
  { what: "redrive of an unknown event", call: (s) => s.queue.redrive({ eventId: "Z9", expectedGeneration: 1, reason: "fix" }), error: "EventNotFound" },
  { what: "redrive of an acked event", call: (s) => s.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "fix" }), error: "NotQuarantined" },
  { what: "redrive of an in-flight event", call: (s) => s.queue.redrive({ eventId: "C1", expectedGeneration: 1, reason: "fix" }), error: "NotQuarantined" },
  { what: "redrive of a ready event", call: (s) => s.queue.redrive({ eventId: "A2", expectedGeneration: 0, reason: "fix" }), error: "NotQuarantined" },
  { what: "redrive with an older generation", call: (s) => s.queue.redrive({ eventId: "B1", expectedGeneration: 0, reason: "fix" }), error: "GenerationMismatch" },
  { what: "redrive with a newer generation", call: (s) => s.queue.redrive({ eventId: "B1", expectedGeneration: 2, reason: "fix" }), error: "GenerationMismatch" },

  // the receiver
  { what: "receive(null)", call: (s) => s.inbox.receive(null as never), error: "InvalidInput" },
  { what: "receive({})", call: (s) => s.inbox.receive({} as never), error: "InvalidInput" },
  { what: "receive of an array nested 3,000 levels deep", call: (s) => s.inbox.receive(deepArgument as never), error: "InvalidInput" },
  ...badIds.flatMap(([what, id]): Array<Case> => [
    {
      what: `receive with ${what} as event id`,
      call: (s) => s.inbox.receive({ eventId: id as string, flowId: "A", seq: 2, body: { delta: 2 } }),
      error: "InvalidInput"
    },
    {
      what: `receive with ${what} as flow id`,
      call: (s) => s.inbox.receive({ eventId: "A2", flowId: id as string, seq: 2, body: { delta: 2 } }),
      error: "InvalidInput"
    }
  ]),
  ...[...badIntegers, ["0", 0] as const, ["missing", undefined] as const].map(([what, seq]): Case => ({
    what: `receive with seq ${what}`,
    call: (s) => s.inbox.receive({ eventId: "A2", flowId: "A", seq: seq as number, body: { delta: 2 } }),
    error: "InvalidInput"
  })),
  ...badBodies.filter(([what]) => !what.startsWith("2 MiB")).map(([what, body]): Case => ({
    what: `receive with a body holding ${what}`,
    call: (s) => s.inbox.receive({ eventId: "A2", flowId: "A", seq: 2, body }),
    error: "InvalidInput"
  }))
]

// ---- running the catalogue -------------------------------------------------------------------------

let template: Files

beforeAll(async () => {
  template = filesIn(makeDir("bad-input-template"))
  await writeTemplate(template)
}, 60_000)

afterAll(() => fs.rmSync(template.dir, { recursive: true, force: true }))

const services = (files: Files) =>
  Effect.gen(function*() {
    const { inbox, queue } = yield* openStores(files)
    const transport = yield* Effect.provideService(Transports.fromInbox, Inbox, inbox)
    const relay = yield* Relay.make.pipe(Effect.provideService(RelayQueue, queue), Effect.provideService(Transport, transport))
    return { queue, inbox, relay }
  })

/** Runs `c` on a fresh copy of the template; returns its exit and the files that changed. */
const runCase = async (c: Case) => {
  const files = copyTemplate(template, "bad-input")
  try {
    const before = filesOf(files.dir)
    const exit = await Effect.runPromise(
      Effect.scoped(Effect.flatMap(services(files), (s) => Effect.exit(Effect.suspend(() => c.call(s))))).pipe(
        TickClock.at(TemplateTick)
      )
    )
    return { exit, changed: changedFiles(before, filesOf(files.dir)) }
  } finally {
    fs.rmSync(files.dir, { recursive: true, force: true })
  }
}

const describeExit = (exit: Exit.Exit<unknown, unknown>): string =>
  Exit.isSuccess(exit) ? `success ${JSON.stringify(exit.value)}` : Cause.pretty(exit.cause).slice(0, 600)

describe("bad input: every public entry point, typed errors, stored files byte-identical", () => {
  for (const c of cases) {
    it(c.what, async () => {
      const { changed, exit } = await runCase(c)
      if (c.outcome !== undefined) {
        expect(Exit.isSuccess(exit) ? exit.value : describeExit(exit)).toEqual(c.outcome)
      } else {
        // A typed failure (Fail), not a defect (Die) and not a success.
        const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
        expect(Option.isSome(error), describeExit(exit)).toBe(true)
        const failure = Option.getOrThrow(error) as { readonly _tag: string; readonly message: string }
        expect(failure._tag).toBe(c.error)
        // A clear message: it names what is wrong, and does not echo megabytes of input.
        expect(failure.message.length).toBeGreaterThan(0)
        expect(failure.message.length).toBeLessThan(5_000)
        if (c.mentions) expect(failure.message).toMatch(c.mentions)
      }
      expect(changed, "files changed by a refused call").toEqual([])
    }, 30_000)
  }
})

// ---- store files that are not ours ---------------------------------------------------------------------

/** Opens a queue (or an inbox) on `filename` and returns the exit of the opening. */
const openQueue = (filename: string, options: Partial<SqliteRelayQueue.SqliteRelayQueueOptions> = {}) =>
  Effect.runPromise(Effect.exit(Effect.scoped(Effect.asVoid(SqliteRelayQueue.make({ filename, ...options })))))
const openInbox = (filename: string, options: Partial<SqliteInbox.SqliteInboxOptions> = {}) =>
  Effect.runPromise(Effect.exit(Effect.scoped(Effect.asVoid(SqliteInbox.make({ filename, business: inboxBusiness(), ...options })))))
const openReadonly = (filename: string, options: Partial<SqliteRelayQueue.SqliteRelayQueueOptions> = {}) =>
  Effect.runPromise(Effect.exit(Effect.scoped(Effect.asVoid(SqliteRelayQueue.makeReadonly({ filename, ...options })))))

const expectTypedFailure = (exit: Exit.Exit<void, unknown>, tag: string) => {
  const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
  expect(Option.isSome(error), describeExit(exit)).toBe(true)
  const failure = Option.getOrThrow(error) as { readonly _tag?: unknown; readonly message?: unknown }
  expect(failure._tag).toBe(tag)
  expect(typeof failure.message).toBe("string")
}

/** Another application's database: its own tables and rows, no table of ours. */
const otherApplication = (file: string) => {
  const db = new Database(file)
  db.exec(`CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
    INSERT INTO customer (name) VALUES ('Ada'), ('Grace');
    CREATE TABLE invoice (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customer(id), cents INTEGER);
    INSERT INTO invoice (customer_id, cents) VALUES (1, 1200);`)
  db.close()
}

interface PathCase {
  readonly what: string
  /** Prepares the directory; returns the path to open. */
  readonly prepare: (dir: string) => string | Promise<string>
  readonly open: (filename: string) => Promise<Exit.Exit<void, unknown>>
  /** The error expected. */
  readonly error: string
}

/** Options of the wrong kind (nothing is created): a case for a queue and for an inbox each. */
const badOptions: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
  ["an unknown synchronous mode", { synchronous: "sometimes" }],
  ["a busy timeout that is a string", { busyTimeoutMillis: "5000" }],
  ["a filename that is not a string", { filename: 5 }],
  ["no filename", { filename: undefined }],
  ["a retention that is not an object", { retention: "1 day" }],
  ["a retention window that is not a duration", { retention: { acked: "sundial", receipts: "sundial" } }]
]

// A file that is not a SQLite database is a storage failure (SqlError: docs/protocol.md,
// Transactions and errors); a SQLite database that is not this kind of store, or is newer than this
// library, is IncompatibleStore; bad options are InvalidInput — each before anything is written.
const pathCases: ReadonlyArray<PathCase> = [
  {
    what: "a queue path that is a text file",
    prepare: (dir) => {
      const file = path.join(dir, "queue.db")
      fs.writeFileSync(file, "this is not a database\n".repeat(200))
      return file
    },
    open: (f) => openQueue(f), error: "SqlError"
  },
  {
    what: "a queue path that is a short text file",
    prepare: (dir) => {
      const file = path.join(dir, "queue.db")
      fs.writeFileSync(file, "hi")
      return file
    },
    open: (f) => openQueue(f), error: "SqlError"
  },
  {
    what: "a queue path that is a JSON file",
    prepare: (dir) => {
      const file = path.join(dir, "queue.json")
      fs.writeFileSync(file, JSON.stringify({ events: [{ id: "A1" }] }))
      return file
    },
    open: (f) => openQueue(f), error: "SqlError"
  },
  { what: "a queue path that is a directory", prepare: (dir) => dir, open: (f) => openQueue(f), error: "SqlError" },
  { what: "a queue path in a directory that does not exist", prepare: (dir) => path.join(dir, "missing", "queue.db"), open: (f) => openQueue(f), error: "SqlError" },
  { what: "a receiver path that is a text file", prepare: (dir) => {
    const file = path.join(dir, "inbox.db")
    fs.writeFileSync(file, "this is not a database\n".repeat(200))
    return file
  }, open: (f) => openInbox(f), error: "SqlError" },
  {
    what: "a queue path that is another application's SQLite database",
    prepare: (dir) => {
      const file = path.join(dir, "app.db")
      otherApplication(file)
      return file
    },
    open: (f) => openQueue(f), error: "IncompatibleStore"
  },
  {
    what: "a receiver path that is another application's SQLite database",
    prepare: (dir) => {
      const file = path.join(dir, "app.db")
      otherApplication(file)
      return file
    },
    open: (f) => openInbox(f), error: "IncompatibleStore"
  },
  {
    what: "a queue path that is a receiver's store",
    prepare: async (dir) => {
      const files = filesIn(dir)
      await writeTemplate(files)
      fs.rmSync(files.queue)
      return files.inbox
    },
    open: (f) => openQueue(f), error: "IncompatibleStore"
  },
  {
    what: "a receiver path that is a queue's store",
    prepare: async (dir) => {
      const files = filesIn(dir)
      await writeTemplate(files)
      fs.rmSync(files.inbox)
      return files.queue
    },
    open: (f) => openInbox(f), error: "IncompatibleStore"
  },
  {
    what: "a queue store written by a newer schema version",
    prepare: async (dir) => {
      const files = filesIn(dir)
      await writeTemplate(files)
      const next = latestMigration(files.queue, "relay_migrations") + 1
      execOn(files.queue, `INSERT INTO relay_migrations (migration_id, name) VALUES (${next}, 'from_a_newer_release')`)
      return files.queue
    },
    open: (f) => openQueue(f), error: "IncompatibleStore"
  },
  {
    what: "a receiver store written by a newer schema version",
    prepare: async (dir) => {
      const files = filesIn(dir)
      await writeTemplate(files)
      const next = latestMigration(files.inbox, "inbox_migrations") + 1
      execOn(files.inbox, `INSERT INTO inbox_migrations (migration_id, name) VALUES (${next}, 'from_a_newer_release')`)
      return files.inbox
    },
    open: (f) => openInbox(f), error: "IncompatibleStore"
  },
  {
    what: "a queue opened with an invalid policy (nothing is created)",
    prepare: (dir) => path.join(dir, "queue.db"),
    open: (f) => openQueue(f, { policy: { leaseTicks: 0 } }), error: "InvalidInput"
  },
  {
    what: "a queue opened with a NaN busy timeout (nothing is created)",
    prepare: (dir) => path.join(dir, "queue.db"),
    open: (f) => openQueue(f, { busyTimeoutMillis: Number.NaN }), error: "InvalidInput"
  },
  {
    what: "a queue opened with a negative busy timeout (nothing is created)",
    prepare: (dir) => path.join(dir, "queue.db"),
    open: (f) => openQueue(f, { busyTimeoutMillis: -1 }), error: "InvalidInput"
  },
  ...badOptions.flatMap(([what, options]): ReadonlyArray<PathCase> => [
    { what: `a queue opened with ${what}`, prepare: (dir) => path.join(dir, "queue.db"), open: (f) => openQueue(f, options), error: "InvalidInput" },
    { what: `an inbox opened with ${what}`, prepare: (dir) => path.join(dir, "inbox.db"), open: (f) => openInbox(f, options), error: "InvalidInput" }
  ]),
  {
    what: "a read-only queue opened with an unknown synchronous mode",
    prepare: (dir) => path.join(dir, "queue.db"),
    open: (f) => openReadonly(f, { synchronous: "sometimes" as never }), error: "InvalidInput"
  },
  {
    what: "a read-only queue whose filename is not a string",
    prepare: (dir) => path.join(dir, "queue.db"),
    open: () => openReadonly(5 as never), error: "InvalidInput"
  }
]

describe("store files that are not ours: typed errors, files byte-identical", () => {
  for (const c of pathCases) {
    it(c.what, async () => {
      const dir = makeDir("bad-path")
      try {
        const target = await c.prepare(dir)
        const before = filesOf(dir)
        const exit = await c.open(target)
        expectTypedFailure(exit, c.error)
        expect(changedFiles(before, filesOf(dir)), "files changed by a refused open").toEqual([])
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    }, 30_000)
  }

  it("control: the template's own files open, and opening and closing them changes no byte", async () => {
    const files = copyTemplate(template, "bad-path-control")
    try {
      const before = filesOf(files.dir)
      const exit = await Effect.runPromise(Effect.exit(Effect.scoped(Effect.asVoid(openStores(files)))))
      expect(Exit.isSuccess(exit), describeExit(exit)).toBe(true)
      expect(changedFiles(before, filesOf(files.dir))).toEqual([])
    } finally {
      fs.rmSync(files.dir, { recursive: true, force: true })
    }
  })
})
