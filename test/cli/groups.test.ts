/**
 * Tenants on the real bin: `groups` lists each group with its weight and flow counts, `flows
 * --group` lists one group's flows (and every flows table shows the group), `enqueue --group`
 * stores the flow's group, and a flow's group cannot change: one `GroupConflict` line, exit 1,
 * the store file unchanged.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { bin, lines, Parallel, pool, tempDir } from "./support.js"

const dir = tempDir("groups")
const template = path.join(dir, "template.db")

/**
 * Group acme (weight 2): acme/1 with two events, acme/2 with one, acme/3 drained (its one event
 * acked); group globex: globex/1 with one event; solo: a flow of no group.
 */
beforeAll(() =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const queue = yield* SqliteRelayQueue.make({ filename: template })
    yield* queue.enqueue({ eventId: "acme-3a", flowId: "acme/3", group: "acme", body: { delta: 1 } })
    const claimed = yield* queue.claim
    if (claimed._tag !== "Claimed" || claimed.event.eventId !== "acme-3a") return yield* Effect.dieMessage("expected to claim acme-3a")
    yield* queue.settle(claimed.token, { _tag: "Accepted" })
    yield* queue.setGroupWeight({ groupId: "acme", weight: 2 })
    yield* queue.enqueueBatch([
      { eventId: "acme-1a", flowId: "acme/1", group: "acme", body: { delta: 1 } },
      { eventId: "acme-1b", flowId: "acme/1", body: { delta: 2 } },
      { eventId: "acme-2a", flowId: "acme/2", group: "acme", body: { delta: 3 } },
      { eventId: "globex-1a", flowId: "globex/1", group: "globex", body: { delta: 4 } },
      { eventId: "solo-a", flowId: "solo", body: { delta: 5 } }
    ])
  }))))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** A copy of the template store of its own. */
const copy = (name: string): string => {
  const file = path.join(dir, name)
  fs.copyFileSync(template, file)
  return file
}

interface GroupRow {
  readonly groupId: string
  readonly weight: number
  readonly served: number
  readonly flows: number
  readonly waiting: number
}

interface FlowRow {
  readonly flowId: string
  readonly group: string | null
  readonly seq: number
}

describe("groups", () => {
  it("lists every group with its weight, its flows and how many of them wait, a page at a time", async () => {
    const db = copy("list.db")
    const [table, json, first, rest] = await pool(Parallel, [
      () => bin(["groups", "--db", db]),
      () => bin(["groups", "--db", db, "--json"]),
      () => bin(["groups", "--db", db, "--limit", "1"]),
      () => bin(["groups", "--db", db, "--after", "acme", "--json"])
    ])
    for (const ran of [table, json, first, rest]) expect(ran!.code, ran!.stderr).toBe(0)
    const listed = JSON.parse(json!.stdout) as Array<GroupRow>
    expect(listed).toEqual([
      { groupId: "acme", weight: 2, served: expect.any(Number), burst: expect.any(Number), flows: 3, waiting: 2, paused: false },
      { groupId: "globex", weight: 1, served: expect.any(Number), burst: expect.any(Number), flows: 1, waiting: 1, paused: false }
    ])
    const rows = lines(table!.stdout).map((line) => line.split(/\s{2,}/))
    expect(rows).toEqual([
      ["GROUP", "WEIGHT", "SERVED", "FLOWS", "WAITING", "PAUSED"],
      ["acme", "2", String(listed[0]!.served), "3", "2"],
      ["globex", "1", String(listed[1]!.served), "1", "1"]
    ])
    expect(lines(first!.stdout)).toEqual([expect.stringMatching(/^GROUP /), expect.stringMatching(/^acme /), "… more: --after acme"])
    expect((JSON.parse(rest!.stdout) as Array<GroupRow>).map((g) => g.groupId)).toEqual(["globex"])
  }, 120_000)

  it("says so when the store has no group", async () => {
    const db = path.join(dir, "none.db")
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: db })
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
    })))
    const [table, json] = await Promise.all([bin(["groups", "--db", db]), bin(["groups", "--db", db, "--json"])])
    expect(table.code, table.stderr).toBe(0)
    expect(table.stdout.trim()).toBe("no groups")
    expect(JSON.parse(json.stdout)).toEqual([])
  }, 120_000)
})

describe("flows --group", () => {
  it("lists only that group's flows; every flows table shows each flow's group", async () => {
    const db = copy("flows.db")
    const [acme, acmeTable, all, empty] = await pool(Parallel, [
      () => bin(["flows", "--db", db, "--group", "acme", "--json"]),
      () => bin(["flows", "--db", db, "--group", "acme"]),
      () => bin(["flows", "--db", db]),
      () => bin(["flows", "--db", db, "--group", "initech"])
    ])
    for (const ran of [acme, acmeTable, all, empty]) expect(ran!.code, ran!.stderr).toBe(0)
    expect((JSON.parse(acme!.stdout) as Array<FlowRow>).map((f) => [f.flowId, f.group])).toEqual([
      ["acme/1", "acme"],
      ["acme/2", "acme"],
      ["acme/3", "acme"]
    ])
    const cells = (text: string) => lines(text).map((line) => line.split(/\s{2,}/).slice(0, 2))
    expect(cells(acmeTable!.stdout)).toEqual([["FLOW", "GROUP"], ["acme/1", "acme"], ["acme/2", "acme"], ["acme/3", "acme"]])
    expect(cells(all!.stdout)).toEqual([
      ["FLOW", "GROUP"],
      ["acme/1", "acme"],
      ["acme/2", "acme"],
      ["acme/3", "acme"],
      ["globex/1", "globex"],
      ["solo", "-"]
    ])
    expect(empty!.stdout.trim()).toBe("no flows in group initech")
  }, 120_000)

  it("a page of one group names the group in its next-page hint", async () => {
    const db = copy("page.db")
    const ran = await bin(["flows", "--db", db, "--group", "acme", "--limit", "2"])
    expect(ran.code, ran.stderr).toBe(0)
    expect(lines(ran.stdout).at(-1)).toBe("… more: --group acme --after acme/2")
  }, 120_000)
})

describe("enqueue --group", () => {
  it("stores the group of a new flow; a later event may leave it out", async () => {
    const db = copy("enqueue.db")
    const first = await bin(["enqueue", "--db", db, "--flow", "initech/1", "--id", "initech-1a", "--group", "initech", "--body", "{\"delta\":1}"])
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout.trim()).toBe("enqueued initech-1a as initech/1#1 (group initech)")
    const second = await bin(["enqueue", "--db", db, "--flow", "initech/1", "--id", "initech-1b", "--body", "{\"delta\":2}", "--json"])
    expect(second.code, second.stderr).toBe(0)
    expect(JSON.parse(second.stdout)).toEqual({ _tag: "Enqueued", seq: 2, eventId: "initech-1b", flowId: "initech/1" })
    const [flows, groups] = await Promise.all([
      bin(["flows", "--db", db, "--group", "initech", "--json"]),
      bin(["groups", "--db", db, "--after", "globex", "--json"])
    ])
    expect((JSON.parse(flows.stdout) as Array<FlowRow>).map((f) => [f.flowId, f.group, f.seq])).toEqual([["initech/1", "initech", 2]])
    expect(JSON.parse(groups.stdout)).toEqual([expect.objectContaining({ groupId: "initech", weight: 1, flows: 1, waiting: 1 })])
  }, 120_000)

  it("another group for a flow is one GroupConflict line, exit 1, and the store file unchanged", async () => {
    const dbs = [copy("conflict-grouped.db"), copy("conflict-ungrouped.db")] as const
    const before = dbs.map((db) => fs.readFileSync(db))
    const [grouped, ungrouped] = await Promise.all([
      bin(["enqueue", "--db", dbs[0], "--flow", "acme/1", "--id", "acme-1c", "--group", "globex", "--body", "{}"]),
      bin(["enqueue", "--db", dbs[1], "--flow", "solo", "--id", "solo-b", "--group", "acme", "--body", "{}"])
    ])
    expect(grouped.code, grouped.stderr).toBe(1)
    expect(lines(grouped.stderr)).toEqual([
      expect.stringMatching(/^fair-relay: flow "acme\/1" belongs to group "acme", not "globex": .*\(GroupConflict\)$/)
    ])
    expect(grouped.stdout).toBe("")
    expect(ungrouped.code, ungrouped.stderr).toBe(1)
    expect(lines(ungrouped.stderr)).toEqual([expect.stringMatching(/^fair-relay: flow "solo" belongs to no group, not "acme": .*\(GroupConflict\)$/)])
    expect(ungrouped.stdout).toBe("")
    dbs.forEach((db, i) => expect(fs.readFileSync(db).equals(before[i]!), db).toBe(true))
  }, 120_000)

  it("a malformed --group is refused with the option's name before any store is opened", async () => {
    const missing = path.join(dir, "never.db")
    const runs = await pool(Parallel, [
      () => bin(["flows", "--db", missing, "--group", ""]),
      () => bin(["groups", "--db", missing, "--after", " "]),
      () => bin(["enqueue", "--db", missing, "--flow", "A", "--id", "A1", "--group", "", "--body", "{}"])
    ])
    expect(runs.map((ran) => [ran.code, lines(ran.stderr)])).toEqual([
      [2, ["--group: group must not be empty"]],
      [2, ["--after: group must not be blank"]],
      [2, ["--group: group must not be empty"]]
    ])
    expect(fs.existsSync(missing)).toBe(false)
  }, 120_000)
})

describe("weight", () => {
  it("sets a group's and a flow's weight; the same weight again changes nothing", async () => {
    const db = copy("weight.db")
    const group = await bin(["weight", "--db", db, "--group", "globex", "3"])
    expect(group.code, group.stderr).toBe(0)
    expect(group.stdout.trim()).toBe("group globex: weight 3")
    const flow = await bin(["weight", "--db", db, "--flow", "acme/2", "4", "--json"])
    expect(flow.code, flow.stderr).toBe(0)
    expect(JSON.parse(flow.stdout)).toEqual({ flowId: "acme/2", weight: 4 })
    const after = fs.readFileSync(db)
    const again = await bin(["weight", "--db", db, "--group", "globex", "3"])
    expect(again.code, again.stderr).toBe(0)
    expect(fs.readFileSync(db).equals(after)).toBe(true)
    const [groups, flows] = await Promise.all([
      bin(["groups", "--db", db, "--json"]),
      bin(["flows", "--db", db, "--group", "acme", "--json"])
    ])
    expect((JSON.parse(groups.stdout) as Array<GroupRow>).map((g) => [g.groupId, g.weight])).toEqual([["acme", 2], ["globex", 3]])
    expect((JSON.parse(flows.stdout) as Array<FlowRow & { readonly weight: number }>).map((f) => [f.flowId, f.weight]))
      .toEqual([["acme/1", 1], ["acme/2", 4], ["acme/3", 1]])
  }, 120_000)

  it("needs exactly one of --flow and --group and a weight in range, refused before the store is opened", async () => {
    const missing = path.join(dir, "never-weight.db")
    const runs = await pool(Parallel, [
      () => bin(["weight", "--db", missing, "2"]),
      () => bin(["weight", "--db", missing, "--flow", "A", "--group", "g", "2"]),
      () => bin(["weight", "--db", missing, "--group", "g", "0"]),
      () => bin(["weight", "--db", missing, "--group", "g", "x"])
    ])
    expect(runs.map((ran) => [ran.code, lines(ran.stderr)])).toEqual([
      [2, ["fair-relay: weight needs exactly one of --flow FLOW or --group GROUP (InvalidOption)"]],
      [2, ["fair-relay: weight needs exactly one of --flow FLOW or --group GROUP (InvalidOption)"]],
      [2, ["W: expected a whole number from 1 to 1000000, got \"0\""]],
      [2, ["W: expected a whole number from 1 to 1000000, got \"x\""]]
    ])
    expect(fs.existsSync(missing)).toBe(false)
  }, 120_000)
})
