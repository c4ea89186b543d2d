// Runs a bench script against the compiled library (`npm run build` first) instead of its
// TypeScript source, for CPU profiles whose frames name the library's functions and lines: under
// tsx every module of src/ is one transpiled line. Preload it after tsx, e.g.
//
//   npm run build && node --import tsx --import ./bench/dist.mjs bench/profile.ts 10000 --daemon --workers 1
//
// Every module the scripts resolve under src/ is swapped for its counterpart under dist/, so no
// module is loaded twice (from both trees).
import * as fs from "node:fs"
import { register } from "node:module"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = fileURLToPath(new URL("../", import.meta.url))
if (!fs.existsSync(`${root}dist/index.js`)) throw new Error("bench/dist.mjs: dist/ is missing; run `npm run build` first")

register(
  "data:text/javascript," + encodeURIComponent(`
    const src = ${JSON.stringify(pathToFileURL(`${root}src/`).href)}
    const dist = ${JSON.stringify(pathToFileURL(`${root}dist/`).href)}
    export async function resolve(specifier, context, next) {
      const resolved = await next(specifier, context)
      if (!resolved.url.startsWith(src)) return resolved
      return { ...resolved, url: dist + resolved.url.slice(src.length).replace(/\\.ts$/, ".js"), format: "module" }
    }`),
  import.meta.url
)
