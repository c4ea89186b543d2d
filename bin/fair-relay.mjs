#!/usr/bin/env node
// Launcher of the fair-relay CLI: the compiled CLI when `npm run build` made one, else the
// TypeScript source through tsx (a dev dependency, present after `npm ci`).
// FAIR_RELAY_CLI_SOURCE=1 forces the source (tests, and development after an old build).
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

const compiled = new URL("../dist/cli/main.js", import.meta.url)
if (existsSync(compiled) && process.env.FAIR_RELAY_CLI_SOURCE !== "1") {
  await import(compiled.href)
} else {
  const { register } = await import("tsx/esm/api")
  register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) })
  await import(new URL("../src/cli/main.ts", import.meta.url).href)
}
