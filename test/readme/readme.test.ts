/**
 * Every ```ts block of README.md and of docs/*.md runs for real: each is written to its own fresh directory (so
 * `queue.db` / `inbox.db` are new), with `fair-relay` pointed at src/, and run by node through
 * tsx (a complete program twice, on the files its first run left); they are also typechecked strictly. The worker snippet runs as a daemon with the Example's
 * layers until it has acked a few events, then is interrupted — the Example's lease must outlast
 * relay.run's delivery timeout or the daemon refuses to start. See ./snippets.ts for the markers.
 */
import { afterAll, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { createRequire } from "node:module"
import { pgUrl, withSchema } from "../support/backends.js"
import { DaemonDone, extract, fromSource, program } from "./snippets.js"
import type { Snippet } from "./snippets.js"

const root = fileURLToPath(new URL("../../", import.meta.url))
const require = createRequire(import.meta.url)
const srcIndex = path.join(root, "src", "index.ts")
const readme = fs.readFileSync(path.join(root, "README.md"), "utf8")
const readmeSnippets = extract(readme, "README.md")
const example = readmeSnippets.find((snippet) => snippet.name === "Example")
// Whatever docs/*.md hold at test time, under the same markers (a docs fragment continues the README's Example).
const docFiles = fs.readdirSync(path.join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
const snippets = [
  ...readmeSnippets,
  ...docFiles.flatMap((doc) => extract(fs.readFileSync(path.join(root, doc), "utf8"), doc))
]

// Inside the repository (.tmp/ is ignored by git) so `effect` and the other packages resolve
// from its node_modules, the same copies src/ uses.
fs.mkdirSync(path.join(root, ".tmp"), { recursive: true })
const base = fs.mkdtempSync(path.join(root, ".tmp", "readme-"))
afterAll(() => fs.rmSync(base, { recursive: true, force: true }))

/** Writes the program of one snippet to its own directory; returns the file. */
const write = (snippet: Snippet, index: number): string => {
  const dir = path.join(base, `snippet-${index + 1}`)
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, "snippet.ts")
  fs.writeFileSync(file, `// ${snippet.file}:${snippet.line} (${snippet.name})\n${fromSource(program(snippet, example!), file, srcIndex)}\n`)
  return file
}

const files = example === undefined ? [] : snippets.map(write)

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const runFile = (file: string, env: Record<string, string> = {}): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", file], {
      cwd: path.dirname(file),
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`${file} did not finish in time\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, 120_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

/** Runs `body` with the URL of a fresh schema of the PostgreSQL test database, dropped afterwards. */
const inFreshSchema = async <A>(body: (url: string) => Promise<A>): Promise<A> => {
  const admin = new pg.Client({ connectionString: pgUrl })
  await admin.connect()
  const schema = `readme_${process.pid}_${Date.now().toString(36)}`
  await admin.query(`CREATE SCHEMA ${schema}`)
  try {
    return await body(withSchema(pgUrl!, schema))
  } finally {
    await admin.query(`DROP SCHEMA ${schema} CASCADE`)
    await admin.end()
  }
}

describe("README.md and docs/*.md snippets", () => {
  it("the README has an Example and marks every fragment", () => {
    expect(example, "a ```ts block under a heading \"Example\"").toBeDefined()
    expect(readmeSnippets.length).toBeGreaterThanOrEqual(3)
    expect(readmeSnippets.map((snippet) => snippet.kind)).toContain("in-program")
  })

  snippets.forEach((snippet, index) => {
    // A snippet on PostgreSQL reads DATABASE_URL: it runs in a fresh schema of FAIR_RELAY_PG_URL's database.
    const onPostgres = snippet.code.includes("DATABASE_URL")
    if (onPostgres && pgUrl === undefined) {
      it.skip(`runs ${snippet.name} (${snippet.file}:${snippet.line}) [SKIPPED: FAIR_RELAY_PG_URL is not set]`, () => {})
      return
    }
    it(`runs ${snippet.name} (${snippet.file}:${snippet.line}, ${snippet.kind})${snippet.kind === "complete" ? ", and again on its own files" : ""}`, async () => {
      // A complete program is run twice on the same files (or schema): a reader runs it again,
      // and the second run must not fail on what the first one stored.
      const twice = (env: Record<string, string>) =>
        runFile(files[index]!, env).then(async (first) =>
          [first, snippet.kind === "complete" && first.code === 0 ? await runFile(files[index]!, env) : undefined] as const
        )
      const [ran, again] = onPostgres ? await inFreshSchema((url) => twice({ DATABASE_URL: url })) : await twice({})
      expect(ran.code, `exit ${ran.code}\nstdout: ${ran.stdout}\nstderr: ${ran.stderr}`).toBe(0)
      if (again !== undefined) expect(again.code, `second run: exit ${again.code}\nstdout: ${again.stdout}\nstderr: ${again.stderr}`).toBe(0)
      if (snippet === example) {
        // Both of order-1's events delivered and acked, in order.
        expect(ran.stdout.match(/_tag: 'Delivered'/g)?.length, ran.stdout).toBe(2)
        expect(ran.stdout.match(/_tag: 'Acked'/g)?.length, ran.stdout).toBe(2)
        expect(ran.stdout.indexOf("order-1:created")).toBeLessThan(ran.stdout.indexOf("order-1:paid"))
      }
      if (snippet.kind === "in-program") expect(ran.stdout).toContain(DaemonDone)
    }, 150_000)
  })

  it("typechecks every snippet strictly (NodeNext modules)", async () => {
    // The snippet directories hold no package.json: mark them ESM for NodeNext's top-level await.
    fs.writeFileSync(path.join(base, "package.json"), `{ "type": "module" }\n`)
    fs.writeFileSync(path.join(base, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        strict: true,
        exactOptionalPropertyTypes: true,
        noUncheckedIndexedAccess: true,
        module: "nodenext",
        moduleResolution: "nodenext",
        target: "es2022",
        lib: ["es2022"],
        types: ["node"],
        skipLibCheck: true,
        noEmit: true
      },
      files: files.map((file) => path.relative(base, file))
    }, null, 2))
    // tsc in a child process: a compile of this size blocks a thread for tens of seconds, which
    // would starve the test worker's own messages to vitest.
    const tsc = path.join(path.dirname(require.resolve("typescript/package.json")), "bin", "tsc")
    const ran = await new Promise<Ran>((resolve, reject) => {
      const child = spawn(process.execPath, [tsc, "-p", "tsconfig.json", "--pretty", "false"], {
        cwd: base,
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      child.on("error", reject)
      child.on("close", (code) => resolve({ code, stdout, stderr }))
    })
    // Only the snippets' own errors (and any without a file): src/ has its own typecheck (npm run typecheck).
    const errors = `${ran.stdout}\n${ran.stderr}`.split("\n")
      .filter((line) => /error TS\d+/.test(line) && !line.startsWith(".."))
      .map((line) => {
        const index = /^snippet-(\d+)\//.exec(line)?.[1]
        const snippet = index === undefined ? undefined : snippets[Number(index) - 1]
        return snippet === undefined ? line : `${snippet.file}:${snippet.line} (${snippet.name}): ${line}`
      })
    expect(errors).toEqual([])
    // tsc ran and finished: its exit code is 0, or 2 with errors of src/ only (reported by npm run typecheck).
    expect([0, 2], `tsc exit ${ran.code}\n${ran.stdout}\n${ran.stderr}`).toContain(ran.code)
  }, 180_000)
})
