/**
 * vitest globalSetup: bundles, once per `vitest run`, what the tests start as child processes, so
 * that a child starts plain node on one file (~0.3 s of CPU) instead of tsx compiling hundreds of
 * modules (~1–2.5 s of CPU per start, which dominated the real-process and CLI tests).
 *
 * - The CLI, with the options of the shipped bundle (bin/cli-bundle.mjs); the tests get its path
 *   with `inject("cliBundle")` (test/cli/support.ts). FAIR_RELAY_CLI_SOURCE=1: none, the CLI tests
 *   run the source through tsx.
 * - The leaf children of the real-process scenarios (`Children`: processes that spawn none
 *   themselves); FAIR_RELAY_CHILD_BUNDLES names their directory, and `spawnChild`
 *   (scenarios/processes/spawn.ts) runs `<dir>/<script path>.mjs` when it exists, `node --import
 *   tsx <script>` otherwise. Set here, before vitest starts its workers, so they and the processes
 *   they spawn (the chaos runner) inherit it. FAIR_RELAY_CHILD_SOURCE=1: none, tsx as before.
 *
 * Everything goes to `.tmp/` inside the repository (so the external better-sqlite3 resolves from
 * node_modules) and is removed after the run.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { TestProject } from "vitest/node"
import { cliBundleOptions } from "../../bin/cli-bundle.mjs"

declare module "vitest" {
  export interface ProvidedContext {
    /** The CLI bundle built for this run, or "" when the tests run the source (FAIR_RELAY_CLI_SOURCE=1). */
    cliBundle: string
  }
}

const root = fileURLToPath(new URL("../../", import.meta.url))

/** The child scripts bundled (relative to the repository root): each spawns no process itself. */
export const Children = [
  "scenarios/chaos/worker.ts",
  "scenarios/chaos/producer.ts",
  "scenarios/processes/claimRaceChild.ts",
  "scenarios/processes/crashChild.ts",
  "scenarios/processes/httpWorkerChild.ts",
  "scenarios/processes/outboxChild.ts",
  "scenarios/processes/writeRaceChild.ts"
]

export default async function setup(project: TestProject) {
  const wantCli = process.env.FAIR_RELAY_CLI_SOURCE !== "1"
  const wantChildren = process.env.FAIR_RELAY_CHILD_SOURCE !== "1"
  project.provide("cliBundle", "")
  if (!wantCli && !wantChildren) return
  fs.mkdirSync(path.join(root, ".tmp"), { recursive: true })
  const dir = fs.mkdtempSync(path.join(root, ".tmp", "bundles-"))
  // mkdtemp makes it 0700: a CLI test runs the bundle as another user (nobody) too.
  fs.chmodSync(dir, 0o755)
  const esbuild = await import("esbuild")
  const builds: Array<Promise<unknown>> = []
  if (wantCli) {
    // Two directories below the repository root, as dist/cli/fair-relay.mjs is: the CLI finds
    // package.json (--version) and the repository (demo) at ../../ from its own file.
    const outfile = path.join(dir, "fair-relay.mjs")
    builds.push(esbuild.build({ ...cliBundleOptions, absWorkingDir: root, outfile }).then(() => project.provide("cliBundle", outfile)))
  }
  if (wantChildren) {
    const outdir = path.join(dir, "children")
    builds.push(
      esbuild.build({
        ...cliBundleOptions,
        entryPoints: Children,
        // Readable stack traces from a failing child.
        minify: false,
        absWorkingDir: root,
        outbase: ".",
        outdir,
        outExtension: { ".js": ".mjs" },
        // pg's optional native binding, which the children never load.
        external: [...cliBundleOptions.external, "pg-native"]
      }).then(() => {
        process.env.FAIR_RELAY_CHILD_BUNDLES = outdir
      })
    )
  }
  await Promise.all(builds)
  return () => {
    delete process.env.FAIR_RELAY_CHILD_BUNDLES
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
