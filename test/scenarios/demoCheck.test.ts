/**
 * `npm run demo -- --check` compares a run of every scenario with the frozen results: the whole
 * check passes on the committed file, and it fails when one frozen value is edited.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { testTmpDir } from "../support/tmp.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const frozen = path.join(root, "scenarios/results.json")
const demoArgs = (args: ReadonlyArray<string>) => ["--import", "tsx", path.join(root, "scenarios/main.ts"), ...args]

/** Runs the demo without blocking this worker (the whole catalog starts child processes of its own). */
const demo = (...args: Array<string>) =>
  new Promise<{ readonly status: number | null; readonly stdout: string; readonly stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, demoArgs(args), { cwd: root })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (status) => resolve({ status, stdout, stderr }))
  })

describe("demo --check", () => {
  it("the whole demo reproduces every frozen result", { timeout: 240_000 }, async () => {
    const run = await demo("--check")
    const frozenFacts = JSON.parse(fs.readFileSync(frozen, "utf8")) as Record<string, unknown>
    const names = Object.keys(frozenFacts)
    expect(names.length).toBe(23)
    // Every frozen scenario ran and passed its own checks, and nothing differs from its frozen facts.
    for (const name of names) expect(run.stdout, run.stderr).toMatch(new RegExp(`^PASS +\\d+ ${name} `, "m"))
    expect(run.stdout).not.toContain("CHECK FAIL")
    expect(run.stdout).toContain("check against results.json: identical")
    expect(run.stdout).toContain(`${names.length} passed, 0 failed`)
    expect(run.status).toBe(0)
    // tenant_fairness: B every other claim with groups, 1 in 51 without.
    expect(run.stdout).toMatch(/^PASS +23 tenant_fairness/m)
    const fairness = frozenFacts.tenant_fairness as { grouped: { tenants: string }; ungrouped: { bClaims: Array<number> } }
    expect(fairness.grouped.tenants).toBe("AB".repeat(51))
    expect(fairness.ungrouped.bClaims).toEqual([51, 102])
  })

  it("fails when one frozen value is edited", async () => {
    const dir = fs.mkdtempSync(path.join(testTmpDir(), "fair-relay-frozen-"))
    try {
      const edited = JSON.parse(fs.readFileSync(frozen, "utf8"))
      expect(edited.redrive_after_fix.stores.totals.A).toBe(11)
      edited.redrive_after_fix.stores.totals.A = 12
      const file = path.join(dir, "results.json")
      fs.writeFileSync(file, JSON.stringify(edited))
      const run = await demo("--check", "--only", "redrive_after_fix", "--frozen", file)
      expect(run.stdout).toContain("CHECK FAIL redrive_after_fix")
      expect(run.status).toBe(1)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("exits non-zero on an unknown scenario or option", async () => {
    expect((await demo("--only", "no_such_scenario")).status).toBe(2)
    expect((await demo("--bogus")).status).toBe(2)
  })
})
