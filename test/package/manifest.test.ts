/**
 * What package.json promises a user, checked against the source (fast; the slow end-to-end proof
 * is test/package/pack-check.sh in CI): every package the library imports is declared, `effect`
 * and the `@effect/*` packages users share are peers (one copy in their tree), the CLI is built
 * into dist/ and needs no dev tool at run time, and the tarball ships only dist/ and the bin.
 */
import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { cliBundleOptions } from "../../bin/cli-bundle.mjs"
import { importSpecifiers } from "./imports.js"

const root = fileURLToPath(new URL("../../", import.meta.url))

interface Manifest {
  readonly bin: Record<string, string>
  readonly files: ReadonlyArray<string>
  readonly scripts: Record<string, string>
  readonly dependencies: Record<string, string>
  readonly peerDependencies: Record<string, string>
  readonly devDependencies: Record<string, string>
}

const raw = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as Partial<Manifest>
// Missing sections read as empty, so a check fails on its own assertion rather than a TypeError.
const manifest: Manifest = {
  bin: raw.bin ?? {},
  files: raw.files ?? [],
  scripts: raw.scripts ?? {},
  dependencies: raw.dependencies ?? {},
  peerDependencies: raw.peerDependencies ?? {},
  devDependencies: raw.devDependencies ?? {}
}

/** The .ts files under a directory, recursively. */
const sources = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    return entry.isDirectory() ? sources(full) : entry.name.endsWith(".ts") ? [full] : []
  })

/** The packages (not node: builtins, not relative paths) a file imports, type-only imports excluded. */
const importedPackages = (file: string): Array<string> =>
  importSpecifiers(file)
    .filter((specifier) => !specifier.startsWith(".") && !specifier.startsWith("node:"))
    .map((specifier) => specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/"))

const cli = path.join(root, "src", "cli")
const library = sources(path.join(root, "src")).filter((file) => !file.startsWith(cli + path.sep))
const libraryImports = new Set(library.flatMap(importedPackages))
const cliImports = new Set(sources(cli).flatMap(importedPackages))

/** `^x.y.z` accepts `version` (same major, or same minor below 1.0, and not older). */
const caretAccepts = (range: string, version: string): boolean => {
  const base = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(range)
  const v = /^(\d+)\.(\d+)\.(\d+)$/.exec(version)
  if (base === null || v === null) return false
  const [b, w] = [base.slice(1).map(Number), v.slice(1).map(Number)] as [Array<number>, Array<number>]
  const sameLine = b[0]! > 0 ? w[0] === b[0] : w[0] === 0 && w[1] === b[1]
  const notOlder = w[0]! !== b[0]! ? w[0]! > b[0]! : w[1]! !== b[1]! ? w[1]! > b[1]! : w[2]! >= b[2]!
  return sameLine && notOlder
}

describe("package.json", () => {
  it("declares every package the library imports, as a dependency or a peer", () => {
    const declared = new Set([...Object.keys(manifest.dependencies), ...Object.keys(manifest.peerDependencies)])
    expect([...libraryImports].filter((name) => !declared.has(name))).toEqual([])
    expect(manifest.dependencies["better-sqlite3"]).toBeDefined()
  })

  it("makes effect and the @effect packages users import peers, tested at the pinned dev versions", () => {
    for (const name of ["effect", "@effect/platform", "@effect/platform-node", "@effect/sql", "@effect/experimental"]) {
      expect(manifest.peerDependencies[name], name).toBeDefined()
      expect(manifest.dependencies[name], `${name} must not also be a dependency`).toBeUndefined()
    }
    for (const [name, range] of Object.entries(manifest.peerDependencies)) {
      const pinned = manifest.devDependencies[name]
      expect(pinned, `${name}: pinned in devDependencies for development`).toBeDefined()
      expect(caretAccepts(range, pinned!), `${name}: peer ${range} accepts the tested ${pinned}`).toBe(true)
    }
  })

  it("pins the storage drivers exactly: the versions CI tests are the ones a fresh install takes", () => {
    for (const name of ["pg", "@effect/sql-pg", "@effect/sql-sqlite-node", "better-sqlite3"]) {
      expect(manifest.dependencies[name], name).toMatch(/^\d+\.\d+\.\d+$/)
    }
  })

  it("pulls nothing a user's install does not need", () => {
    const runtime = [...Object.keys(manifest.dependencies), ...Object.keys(manifest.peerDependencies)]
    for (const name of ["@effect/cluster", "@effect/workflow", "@effect/rpc", "@effect/cli", "tsx", "typescript"]) {
      expect(runtime, `${name} is not imported by the library`).not.toContain(name)
      expect(libraryImports.has(name), `${name} imported by the library`).toBe(false)
    }
  })

  it("builds on pack and ships only dist/ and the bin", () => {
    expect(manifest.scripts["prepack"]).toBe("npm run build")
    expect([...manifest.files].sort()).toEqual(["bin/fair-relay.mjs", "dist/"])
    expect(manifest.bin["fair-relay"]).toBe("bin/fair-relay.mjs")
  })

  it("builds the CLI into one file that needs no dev dependency at run time", () => {
    const build = fs.readFileSync(path.join(root, "bin", "build.mjs"), "utf8")
    expect(build).toContain(`outfile: "dist/cli/fair-relay.mjs"`)
    // The options live in bin/cli-bundle.mjs, shared with the test suite's bundle of the CLI.
    expect(build).toContain(`import("./cli-bundle.mjs")`)
    expect(build).toContain(`...cliBundleOptions`)
    // Everything the CLI imports is bundled, except the native addon (a dependency).
    expect(cliBundleOptions).toMatchObject({ entryPoints: ["src/cli/main.ts"], bundle: true, platform: "node", format: "esm" })
    expect(cliBundleOptions.external).toEqual(["better-sqlite3"])
    const bundled = [...cliImports].filter((name) => name !== "better-sqlite3")
    const available = new Set([...Object.keys(manifest.devDependencies), ...Object.keys(manifest.dependencies)])
    expect(bundled.filter((name) => !available.has(name))).toEqual([])
    // The launcher runs the bundle; tsx only for a repository checkout (src/ next to bin/).
    const launcher = fs.readFileSync(path.join(root, "bin", "fair-relay.mjs"), "utf8")
    expect(launcher).toContain(`"../dist/cli/fair-relay.mjs"`)
    expect(launcher.indexOf(`import("tsx/esm/api")`)).toBeGreaterThan(launcher.indexOf("existsSync(source)"))
  })
})
