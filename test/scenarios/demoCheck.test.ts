/**
 * `npm run demo -- --check` compares a run with the frozen results: it passes on the committed
 * file and fails when one frozen value is edited.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { testTmpDir } from "../support/tmp.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const frozen = path.join(root, "scenarios/results.json")

const demo = (...args: Array<string>) =>
  spawnSync(process.execPath, ["--import", "tsx", path.join(root, "scenarios/main.ts"), ...args], { cwd: root, encoding: "utf8" })

describe("demo --check", () => {
  it("passes against the committed frozen results", () => {
    const run = demo("--check", "--only", "redrive_after_fix")
    expect(run.stdout).toContain("check against results.json: identical")
    expect(run.status).toBe(0)
  })

  it("tenant_fairness reproduces its frozen claims: B every other claim with groups, 1 in 51 without", () => {
    const run = demo("--check", "--only", "tenant_fairness")
    expect(run.stdout).toMatch(/^PASS +23 tenant_fairness/m)
    expect(run.stdout).toContain("check against results.json: identical")
    expect(run.status).toBe(0)
    const frozenFacts = JSON.parse(fs.readFileSync(frozen, "utf8")).tenant_fairness
    expect(frozenFacts.grouped.tenants).toBe("AB".repeat(51))
    expect(frozenFacts.ungrouped.bClaims).toEqual([51, 102])
  })

  it("fails when one frozen value is edited", () => {
    const dir = fs.mkdtempSync(path.join(testTmpDir(), "fair-relay-frozen-"))
    try {
      const edited = JSON.parse(fs.readFileSync(frozen, "utf8"))
      expect(edited.redrive_after_fix.stores.totals.A).toBe(11)
      edited.redrive_after_fix.stores.totals.A = 12
      const file = path.join(dir, "results.json")
      fs.writeFileSync(file, JSON.stringify(edited))
      const run = demo("--check", "--only", "redrive_after_fix", "--frozen", file)
      expect(run.stdout).toContain("CHECK FAIL redrive_after_fix")
      expect(run.status).toBe(1)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("exits non-zero on an unknown scenario or option", () => {
    expect(demo("--only", "no_such_scenario").status).toBe(2)
    expect(demo("--bogus").status).toBe(2)
  })
})
