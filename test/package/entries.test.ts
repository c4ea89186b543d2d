/**
 * The package's entry points (package.json `exports`): each names a module of src/ that tsc
 * compiles to the file it points at; `fair-relay` is all the others together; and the backend
 * entries load neither the other backend nor HTTP — the modules an entry's static imports reach
 * (what Node loads for it) are walked from its source, type-only imports left out.
 */
import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { importSpecifiers } from "./imports.js"

const root = fileURLToPath(new URL("../../", import.meta.url))
const src = path.join(root, "src")

const exportsMap = (JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as {
  readonly exports?: Record<string, { readonly types?: string; readonly import?: string }>
}).exports ?? {}

/** The source module an export's `import` target is compiled from (dist/x.js ← src/x.ts). */
const sourceOf = (target: string) => path.join(src, target.replace(/^\.\/dist\//, "").replace(/\.js$/, ".ts"))

/** What a module's value imports and re-exports name: relative files, and packages. */
const importsOf = (file: string): { readonly files: Array<string>; readonly packages: Array<string> } => {
  const specifiers = importSpecifiers(file)
  return {
    files: specifiers.filter((s) => s.startsWith(".")).map((s) => path.resolve(path.dirname(file), s.replace(/\.js$/, ".ts"))),
    packages: specifiers.filter((s) => !s.startsWith(".") && !s.startsWith("node:"))
  }
}

/** Every source module and package an entry's imports reach. */
const reach = (entry: string) => {
  const files = new Set<string>()
  const packages = new Set<string>()
  const visit = (file: string) => {
    if (files.has(file)) return
    files.add(file)
    const imports = importsOf(file)
    for (const p of imports.packages) packages.add(p)
    for (const f of imports.files) visit(f)
  }
  visit(path.join(src, entry))
  return { files: [...files].map((f) => path.relative(src, f)), packages: [...packages] }
}

const isHttp = (file: string) => file.startsWith(`http${path.sep}`) || file.startsWith(`dashboard${path.sep}`)
const isPg = (file: string) => /^layers\/(internal\/)?Pg/.test(file.split(path.sep).join("/"))
const isSqlite = (file: string) => /^layers\/(internal\/)?Sqlite/.test(file.split(path.sep).join("/"))
const httpPackages = (p: string) => p.startsWith("@effect/platform")
const pgPackages = (p: string) => p === "pg" || p.startsWith("@effect/sql-pg")
const sqlitePackages = (p: string) => p === "better-sqlite3" || p.startsWith("@effect/sql-sqlite-node")

describe("package entry points", () => {
  it("each points at a module of src/ compiled to the file named, with its declarations beside it", () => {
    expect(Object.keys(exportsMap).sort()).toEqual([".", "./core", "./dashboard", "./http", "./postgres", "./sqlite"])
    for (const [name, target] of Object.entries(exportsMap)) {
      expect(target.import, name).toMatch(/^\.\/dist\/[a-z]+\.js$/)
      expect(target.types, name).toBe(target.import!.replace(/\.js$/, ".d.ts"))
      expect(fs.existsSync(sourceOf(target.import!)), name).toBe(true)
    }
  })

  it("fair-relay/sqlite loads SQLite and neither PostgreSQL nor HTTP", () => {
    const { files, packages } = reach("sqlite.ts")
    expect(files.filter(isSqlite).length).toBeGreaterThan(0)
    expect(packages.filter(sqlitePackages).length).toBeGreaterThan(0)
    expect(files.filter((f) => isPg(f) || isHttp(f))).toEqual([])
    expect(packages.filter((p) => pgPackages(p) || httpPackages(p))).toEqual([])
  })

  it("fair-relay/postgres loads PostgreSQL and neither SQLite nor HTTP", () => {
    const { files, packages } = reach("postgres.ts")
    expect(files.filter(isPg).length).toBeGreaterThan(0)
    expect(packages.filter(pgPackages).length).toBeGreaterThan(0)
    expect(files.filter((f) => isSqlite(f) || isHttp(f))).toEqual([])
    expect(packages.filter((p) => sqlitePackages(p) || httpPackages(p))).toEqual([])
  })

  it("fair-relay/core loads no backend and no HTTP", () => {
    const { files, packages } = reach("core.ts")
    expect(files.filter((f) => isSqlite(f) || isPg(f) || isHttp(f))).toEqual([])
    expect(packages.filter((p) => sqlitePackages(p) || pgPackages(p) || httpPackages(p))).toEqual([])
  })

  it("fair-relay is every other entry's names, the same values", async () => {
    const [all, core, sqlite, postgres, http, dashboard] = await Promise.all([
      import("../../src/index.js"),
      import("../../src/core.js"),
      import("../../src/sqlite.js"),
      import("../../src/postgres.js"),
      import("../../src/http.js"),
      import("../../src/dashboard.js")
    ])
    const parts: ReadonlyArray<Record<string, unknown>> = [core, sqlite, postgres, http, dashboard]
    const union = new Set(parts.flatMap((part) => Object.keys(part)))
    expect(Object.keys(all).sort()).toEqual([...union].sort())
    for (const part of parts) {
      for (const [name, value] of Object.entries(part)) expect((all as Record<string, unknown>)[name], name).toBe(value)
    }
    // The backend entries carry the core with them: one import line for an application.
    for (const backend of [sqlite, postgres] as ReadonlyArray<Record<string, unknown>>) {
      for (const name of Object.keys(core)) expect(backend[name], name).toBe((core as Record<string, unknown>)[name])
    }
    expect(Object.keys(sqlite).filter((name) => !(name in core)).sort()).toEqual(["SqliteInbox", "SqliteRelayQueue"])
    expect(Object.keys(postgres).filter((name) => !(name in core)).sort()).toEqual(["PgInbox", "PgRelayQueue"])
  })
})
