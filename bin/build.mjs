#!/usr/bin/env node
// `npm run build` (and `prepack`): a clean dist/ with the library compiled by tsc (one .js and
// one .d.ts per module, so the user's bundler and `effect` stay in charge), and the CLI bundled
// into one file, dist/cli/fair-relay.mjs.
//
// Why bundle the CLI: loading ~600 ESM files of effect, @effect/cli and undici took ~1 s per
// start; one minified file starts in about a third of that. The bundle carries its own copy of
// effect and @effect/cli (the CLI shares no Effect values with the user's program), so users do
// not install @effect/cli at all. better-sqlite3 stays external: it is a native addon and a
// dependency of the package.
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../", import.meta.url))
const require = createRequire(import.meta.url)
process.chdir(root)

fs.rmSync("dist", { recursive: true, force: true })
execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", "tsconfig.build.json"], { stdio: "inherit" })

const esbuild = await import("esbuild")
const { cliBundleOptions } = await import("./cli-bundle.mjs")
await esbuild.build({ ...cliBundleOptions, outfile: "dist/cli/fair-relay.mjs" })
