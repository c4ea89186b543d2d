/** What a source file's value imports name, read as text (type-only imports left out). */
import * as fs from "node:fs"

/** The specifiers of a file's value imports, re-exports, side-effect imports and dynamic imports. */
export const importSpecifiers = (file: string): Array<string> => {
  const text = fs.readFileSync(file, "utf8")
  return [
    ...text.matchAll(/^\s*(?:import|export)(?!\s+type\b)[^;]*?\bfrom\s+"([^"]+)"/gms),
    ...text.matchAll(/^\s*import\s+"([^"]+)"/gm),
    ...text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g)
  ].map((match) => match[1]!)
}
