/**
 * The package is ESM-only, and the README says so where installation is described: from a
 * CommonJS module, `require` of every entry point fails with ERR_PACKAGE_PATH_NOT_EXPORTED (the
 * `exports` map has `import` conditions only), while `import()` resolves the package to its
 * build. Run by node in a consumer directory whose `node_modules/fair-relay` is this repository.
 */
import { afterAll, describe, expect, it } from "vitest"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../", import.meta.url))
const exportsMap = (JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as {
  readonly exports: Record<string, unknown>
}).exports
const entries = Object.keys(exportsMap).map((key) => key === "." ? "fair-relay" : `fair-relay/${key.slice(2)}`)

// Inside the repository (.tmp/ is ignored by git), a CommonJS project like a default `npm init` one.
fs.mkdirSync(path.join(root, ".tmp"), { recursive: true })
const consumer = fs.mkdtempSync(path.join(root, ".tmp", "cjs-"))
afterAll(() => fs.rmSync(consumer, { recursive: true, force: true }))
fs.writeFileSync(path.join(consumer, "package.json"), `{ "name": "consumer", "version": "1.0.0", "main": "index.js" }\n`)
fs.mkdirSync(path.join(consumer, "node_modules"))
fs.symlinkSync(root, path.join(consumer, "node_modules", "fair-relay"), "dir")

/** Runs CommonJS `code` in the consumer project; answers what it printed. */
const runCommonJs = (code: string): string => {
  const file = path.join(consumer, "index.js")
  fs.writeFileSync(file, code)
  return execFileSync(process.execPath, [file], { cwd: consumer, encoding: "utf8" })
}

describe("ESM only", () => {
  it("require() of every entry point from CommonJS fails with ERR_PACKAGE_PATH_NOT_EXPORTED", () => {
    const codes = JSON.parse(runCommonJs(`
      const codes = {}
      for (const id of ${JSON.stringify(entries)}) {
        try { require(id); codes[id] = "loaded" } catch (error) { codes[id] = error.code }
      }
      console.log(JSON.stringify(codes))
    `)) as Record<string, string>
    expect(Object.keys(codes)).toContain("fair-relay")
    for (const entry of entries) expect(codes[entry], entry).toBe("ERR_PACKAGE_PATH_NOT_EXPORTED")
  })

  it("import() from CommonJS resolves the package to its build", () => {
    const answer = runCommonJs(`
      import("fair-relay").then(
        (module) => console.log(typeof module.SqliteRelayQueue.layer === "function" ? "loaded" : "no SqliteRelayQueue"),
        (error) => console.log(error.code + " " + error.message)
      )
    `).trim()
    // Without a build (npm run build) the resolved file is missing: the import condition still matched.
    if (answer !== "loaded") {
      expect(answer).toMatch(/^ERR_MODULE_NOT_FOUND .*node_modules[/\\]fair-relay[/\\]dist[/\\]index\.js/)
    }
  })

  it("the README's install section says the package is ESM-only and shows import and import()", () => {
    const readme = fs.readFileSync(path.join(root, "README.md"), "utf8")
    const start = readme.indexOf("\n## Installing it in your project\n")
    expect(start).toBeGreaterThanOrEqual(0)
    const section = readme.slice(start + 1, readme.indexOf("\n## ", start + 1))
    const says = {
      esmOnly: section.includes("ESM-only"),
      requireFails: section.includes("ERR_PACKAGE_PATH_NOT_EXPORTED"),
      staticImport: /import \{ [^}]+ \} from "fair-relay"/.test(section),
      dynamicImport: /await import\("fair-relay"\)/.test(section)
    }
    expect(says).toEqual({ esmOnly: true, requireFails: true, staticImport: true, dynamicImport: true })
  })
})
