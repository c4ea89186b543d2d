// The esbuild options of the CLI bundle, shared by `npm run build` (bin/build.mjs, which writes
// dist/cli/fair-relay.mjs) and the test suite (test/support/bundles.ts, which builds the same
// bundle once per `vitest run` so the CLI tests start plain node instead of tsx).
//
// better-sqlite3 stays external (a native addon and a dependency of the package): the outfile
// must lie inside the repository so that node resolves it from node_modules.
export const cliBundleOptions = {
  entryPoints: ["src/cli/main.ts"],
  bundle: true,
  minify: true,
  platform: "node",
  target: "node20",
  format: "esm",
  external: ["better-sqlite3"],
  // Bundled CommonJS dependencies (undici, yaml) call require(); give the ESM bundle one.
  banner: { js: "import { createRequire as __fairRelayRequire } from 'node:module'; const require = __fairRelayRequire(import.meta.url);" },
  logLevel: "warning"
}
