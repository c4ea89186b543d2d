/**
 * The guard against reaches into other packages' private internals (`scripts/check-internals.mjs`,
 * run by `.ci/run` on `src/`): each kind of reach planted in a file of its own is found, public
 * uses of the same packages pass, and `src/` has none beyond its allow-list.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("../../", import.meta.url))
const script = path.join(root, "scripts", "check-internals.mjs")

/**
 * Runs the guard (on `dir`, else on `src/`) without blocking the test worker: its exit code, and
 * what it printed (stdout when it passed, stderr when it failed).
 */
const guard = (dir?: string) =>
  new Promise<{ readonly code: number; readonly output: string }>((resolve) => {
    execFile(process.execPath, dir === undefined ? [script] : [script, dir], { cwd: root, encoding: "utf8" }, (error, stdout, stderr) =>
      resolve(error === null ? { code: 0, output: stdout } : { code: typeof error.code === "number" ? error.code : -1, output: stderr }))
  })

/** Runs the guard on a folder of the given files (inside the repository, so that packages resolve): its exit code and output. */
const check = async (files: Record<string, string>) => {
  fs.mkdirSync(path.join(root, ".tmp"), { recursive: true })
  const dir = fs.mkdtempSync(path.join(root, ".tmp", "internals-"))
  try {
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text)
    return await guard(dir)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

describe("the private-internals guard", () => {
  it("finds an inner module path, a private member, another package's globalValue key and an undeclared shape", async () => {
    const { code, output } = await check({
      "inner.ts": `import { createRequire } from "node:module"\nexport const utils = createRequire(import.meta.url)("pg/lib/utils.js")\n`,
      "member.ts": `import pg from "pg"\nexport const types = (client: pg.Client) => (client as unknown as { _types: unknown })._types\n`,
      "global.ts": `import { globalValue } from "effect/GlobalValue"\nexport const ref = globalValue("@effect/sql/Statement/currentTransformer", () => 1)\n`,
      "shape.ts": `import type * as Statement from "@effect/sql/Statement"\nexport const compiler = (s: Statement.Statement<unknown>) => (s as { readonly compiler?: object }).compiler\n`,
      "forged.ts": `import type pg from "pg"\nexport const query = { submit: () => {} } as unknown as pg.QueryConfig\n`,
      "patched.ts": `import type pg from "pg"\nexport const patch = (pool: pg.Pool) => {\n  pool.connect = (() => undefined) as typeof pool.connect\n}\n`
    })
    expect(code).toBe(1)
    expect(output).toMatch(/inner\.ts:2: inner module path pg\/lib\/utils\.js/)
    expect(output).toMatch(/member\.ts:2: private member \._types/)
    expect(output).toMatch(/member\.ts:2: a value of a dependency's type asserted to a shape/)
    expect(output).toMatch(/global\.ts:2: globalValue key "@effect\/sql\/Statement\/currentTransformer" belongs to another package/)
    expect(output).toMatch(/shape\.ts:2: a value of a dependency's type asserted to a shape/)
    expect(output).toMatch(/forged\.ts:2: a value forced into a dependency's type through unknown/)
    expect(output).toMatch(/patched\.ts:3: a member of a dependency's object patched in place: pool\.connect = …/)
  }, 60_000)

  it("passes public uses: exported paths, _tag, our own globalValue keys, an error's code", async () => {
    const { code, output } = await check({
      "public.ts": [
        `import * as SqlClient from "@effect/sql/SqlClient"`,
        `import { globalValue } from "effect/GlobalValue"`,
        `import { Exit } from "effect"`,
        `export const tag = (exit: Exit.Exit<number>) => exit._tag`,
        `export const ours = globalValue("fair-relay/Counter", () => 0)`,
        `export const code = (error: Error) => (error as { readonly code?: unknown }).code`,
        `export const client = SqlClient.SqlClient`,
        ``
      ].join("\n")
    })
    expect(output).toMatch(/no reaches/)
    expect(code).toBe(0)
  }, 60_000)

  it("finds none in src/ beyond the allow-list", async () => {
    const { code, output } = await guard()
    expect(output).toMatch(/no reaches/)
    expect(code).toBe(0)
  }, 60_000)
})
