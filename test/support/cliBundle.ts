/**
 * vitest globalSetup: builds the CLI once per `vitest run` with the options of the shipped bundle
 * (bin/cli-bundle.mjs), into `.tmp/` inside the repository (so the external better-sqlite3
 * resolves from node_modules), and gives its path to the tests (`inject("cliBundle")`). A CLI
 * test then starts plain node on one file (~0.3 s) instead of tsx compiling ~600 modules (~1 s of
 * CPU per start). FAIR_RELAY_CLI_SOURCE=1 skips the build: the tests run the source through tsx.
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

export default async function setup(project: TestProject) {
  if (process.env.FAIR_RELAY_CLI_SOURCE === "1") {
    project.provide("cliBundle", "")
    return
  }
  fs.mkdirSync(path.join(root, ".tmp"), { recursive: true })
  const dir = fs.mkdtempSync(path.join(root, ".tmp", "cli-"))
  const outfile = path.join(dir, "fair-relay.mjs")
  const esbuild = await import("esbuild")
  await esbuild.build({ ...cliBundleOptions, absWorkingDir: root, outfile })
  project.provide("cliBundle", outfile)
  return () => fs.rmSync(dir, { recursive: true, force: true })
}
