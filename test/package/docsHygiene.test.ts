/**
 * The docs a user reads (README.md, CHANGELOG.md, docs/) and the source comments (src/) carry no
 * commit hashes, no issue references and no pointers into the spec, and the source comments quote
 * measured figures at most `MaxFigureLines` times: a figure measured once goes stale where nobody
 * re-runs it, so comments say why and `bench/results/` keeps the numbers. The patterns and what
 * they leave out on purpose are documented in ./hygiene.ts, and checked on samples here.
 */
import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import {
  commentLines,
  commitHash,
  figureLines,
  filesUnder,
  issueReference,
  markdownLines,
  quotesFigure,
  specPointer,
  where
} from "./hygiene.js"
import type { ProseLine } from "./hygiene.js"

const root = fileURLToPath(new URL("../../", import.meta.url))
const read = (file: string) => fs.readFileSync(path.join(root, file), "utf8")

/** Source comment lines quoting a measured figure that may remain (each should say why instead). */
const MaxFigureLines = 5

const sourceComments: Array<ProseLine> = filesUnder(root, "src", ".ts").flatMap((file) => commentLines(file, read(file)))
const userDocs: Array<ProseLine> = ["README.md", "CHANGELOG.md", ...filesUnder(root, "docs", ".md")]
  .filter((file) => fs.existsSync(path.join(root, file)))
  .flatMap((file) => markdownLines(file, read(file)))

const matching = (lines: ReadonlyArray<ProseLine>, pattern: RegExp) => lines.filter((line) => pattern.test(line.text))

describe("the patterns", () => {
  it("a commit hash is found; colours, digests, UUIDs, numbers and hex words are not", () => {
    for (const text of ["fixed in 1c215d9", "(see a17dcfe, 5693a7e)", "commit 0123456789abcdef0123456789abcdef01234567"]) {
      expect(commitHash.test(text), text).toBe(true)
    }
    for (
      const text of [
        "color: #c3c8d2; background: #1a2b3c4d",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "a lease of 1500000 ticks",
        "the record was defaced, effaced",
        "0x1f2e3d4c5b"
      ]
    ) {
      expect(commitHash.test(text), text).toBe(false)
    }
  })

  it("an issue reference is found in prose; an entity, a fragment and a name are not", () => {
    for (const text of ["as issue 15 asked", "the targets of issues 12 and 13", "see #60", "(#7)", "PR 42"]) {
      expect(issueReference.test(text), text).toBe(true)
    }
    for (const text of ["it&#39;s", "docs/guide.md#3-steps", "step#2", "one issue at a time", "section 3"]) {
      expect(issueReference.test(text), text).toBe(false)
    }
    expect(specPointer.test("(SPEC §3 table)")).toBe(true)
    expect(specPointer.test("the receivers' wire protocol")).toBe(false)
  })

  it("a measured figure is found; configured values, encodings and powers are not", () => {
    for (
      const text of [
        "a claim ran in 55 µs",
        "from 0.96 to 0.68 ms",
        "client instructions fell 4–5 %",
        "(some fifteen runtime steps)",
        "146 steps a transaction",
        "where `Effect.map` costs four runtime steps",
        "one runtime step where `Metric.update` takes three",
        "12,000 events/s",
        "1.3× faster",
        "304.7 → 246.6",
        "a median of 7 ms",
        "measured on V8"
      ]
    ) {
      expect(quotesFigure(text), text).toBe(true)
    }
    expect(quotesFigure("which cost a transaction 29 runtime", "steps per event")).toBe(true)
    for (
      const text of [
        "default 5000 ms",
        "a 5 ms lease is no production setting",
        "percent-encoded as `%E6%B5%81-3`",
        "(~4.5 × 10^15), with room below 2^53",
        "in the same runtime step",
        "backs off to 100 ms naps"
      ]
    ) {
      expect(quotesFigure(text), text).toBe(false)
    }
  })

  it("comment lines come from comments only, and markdown prose skips fenced code", () => {
    const source = [
      "// a line comment",
      "const url = \"postgres://host/db\" // trailing",
      "/**",
      " * a block",
      " */",
      "const template = `http://example.test/#12 ${1}`"
    ].join("\n")
    expect(commentLines("x.ts", source).map((line) => line.text)).toEqual(["// a line comment", "// trailing", "/**", "* a block", "*/"])
    const markdown = ["prose #1", "```sh", "git show 1c215d9", "```", "after"].join("\n")
    expect(markdownLines("x.md", markdown).map((line) => line.text)).toEqual(["prose #1", "after"])
  })
})

describe("docs and source comments", () => {
  it("the files are there to scan", () => {
    expect(sourceComments.length).toBeGreaterThan(1000)
    expect(userDocs.some((line) => line.file === "README.md")).toBe(true)
  })

  it("source comments name no commit, no issue and no spec section", () => {
    expect(where(matching(sourceComments, commitHash))).toBe("")
    expect(where(matching(sourceComments, issueReference))).toBe("")
    expect(where(matching(sourceComments, specPointer))).toBe("")
  })

  it(`at most ${MaxFigureLines} source comment lines quote a measured figure`, () => {
    const lines = figureLines(sourceComments)
    expect(lines.length, where(lines)).toBeLessThanOrEqual(MaxFigureLines)
  })

  it("README.md, CHANGELOG.md and docs/ name no commit, no issue and no spec section", () => {
    expect(where(matching(userDocs, commitHash))).toBe("")
    expect(where(matching(userDocs, issueReference))).toBe("")
    expect(where(matching(userDocs, specPointer))).toBe("")
  })
})
