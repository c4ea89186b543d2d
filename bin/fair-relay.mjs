#!/usr/bin/env node
// Launcher of the fair-relay CLI. An installed package runs the compiled bundle
// (dist/cli/fair-relay.mjs, made by `npm run build` / `prepack`): plain node, no tsx.
// Inside a repository checkout (src/ next to bin/) the TypeScript source runs through tsx, a dev
// dependency, when there is no build or when FAIR_RELAY_CLI_SOURCE=1 (never a stale build). The
// test suite runs a bundle of its own, built from the current source for each run
// (test/support/bundles.ts), or this launcher with FAIR_RELAY_CLI_SOURCE=1.
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

const compiled = new URL("../dist/cli/fair-relay.mjs", import.meta.url)
const source = new URL("../src/cli/main.ts", import.meta.url)
const wantSource = process.env.FAIR_RELAY_CLI_SOURCE === "1"

if (existsSync(compiled) && !wantSource) {
  await import(compiled.href)
} else if (existsSync(source)) {
  const { register } = await import("tsx/esm/api")
  register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) })
  await import(source.href)
} else {
  process.stderr.write(
    `fair-relay: ${fileURLToPath(compiled)} is missing: this copy of the package was not built (npm run build)\n`
  )
  process.exitCode = 1
}
