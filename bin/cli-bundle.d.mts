import type { BuildOptions } from "esbuild"

/** The esbuild options of the CLI bundle (without `outfile`): see cli-bundle.mjs. */
export declare const cliBundleOptions: BuildOptions & {
  readonly entryPoints: ReadonlyArray<string>
  readonly external: ReadonlyArray<string>
}
