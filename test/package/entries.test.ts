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

/** The parts an entry may load or leave out: their source modules, and their packages. */
const parts = {
  SQLite: {
    file: (file: string) => /^layers\/(internal\/)?Sqlite/.test(file.split(path.sep).join("/")),
    pkg: (p: string) => p === "better-sqlite3" || p.startsWith("@effect/sql-sqlite-node")
  },
  PostgreSQL: {
    file: (file: string) => /^layers\/(internal\/)?Pg/.test(file.split(path.sep).join("/")),
    pkg: (p: string) => p === "pg" || p.startsWith("@effect/sql-pg")
  },
  HTTP: {
    file: (file: string) => file.startsWith(`http${path.sep}`) || file.startsWith(`dashboard${path.sep}`),
    pkg: (p: string) => p.startsWith("@effect/platform")
  }
}
type Part = keyof typeof parts

/** Each lean entry, and the parts it loads: every other part it must not. */
const lean: ReadonlyArray<readonly [string, ReadonlyArray<Part>]> = [
  ["fair-relay/sqlite", ["SQLite"]],
  ["fair-relay/postgres", ["PostgreSQL"]],
  ["fair-relay/core", []]
]

describe("package entry points", () => {
  it("each points at a module of src/ compiled to the file named, with its declarations beside it", () => {
    expect(Object.keys(exportsMap).sort()).toEqual([".", "./core", "./dashboard", "./http", "./postgres", "./sqlite"])
    for (const [name, target] of Object.entries(exportsMap)) {
      expect(target.import, name).toMatch(/^\.\/dist\/[a-z]+\.js$/)
      expect(target.types, name).toBe(target.import!.replace(/\.js$/, ".d.ts"))
      expect(fs.existsSync(sourceOf(target.import!)), name).toBe(true)
    }
  })

  for (const [entry, loaded] of lean) {
    const left = (Object.keys(parts) as Array<Part>).filter((part) => !loaded.includes(part))
    it(`${entry} loads ${loaded.join(", ") || "no backend"} and no ${left.join(" or ")}`, () => {
      const { files, packages } = reach(`${entry.replace("fair-relay/", "")}.ts`)
      for (const part of loaded) {
        expect(files.filter(parts[part].file).length, part).toBeGreaterThan(0)
        expect(packages.filter(parts[part].pkg).length, part).toBeGreaterThan(0)
      }
      for (const part of left) {
        expect(files.filter(parts[part].file), part).toEqual([])
        expect(packages.filter(parts[part].pkg), part).toEqual([])
      }
    })
  }

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
    expect(Object.keys(sqlite).filter((name) => !(name in core)).sort()).toEqual(["MemoryRelayQueue", "SqliteInbox", "SqliteRelayQueue"])
    expect(Object.keys(postgres).filter((name) => !(name in core)).sort()).toEqual(["PgInbox", "PgRelayQueue"])
  })
})
