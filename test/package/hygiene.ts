/**
 * What the house style keeps out of the docs a user reads and out of source comments: commit
 * hashes, issue references, pointers into a spec the user does not have, and figures measured once
 * (they go stale in a comment; `bench/results/` and the docs' performance table keep them). The
 * patterns live here, apart from the test, so their false positives can be checked on their own.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

/** One line of prose: where it is and its text. */
export interface ProseLine {
  readonly file: string
  readonly line: number
  readonly text: string
}

/**
 * A commit hash: 7 to 40 lowercase hex digits with at least one digit and one letter (so neither a
 * plain number nor a word such as "defaced" or "accede"), standing alone — not after `#` (a CSS
 * colour such as `#c3c8d2`), not part of a longer word or of a dash-joined run (a UUID's groups),
 * and at most 40 digits (a sha256 digest's 64 are not a commit).
 */
export const commitHash = /(?<![#\w-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])/

/**
 * An issue or pull-request reference in prose: "issue 15", "issues 12 and 13", "PR 7", or "#12"
 * after a space, an opening bracket or the start of a line (so not `a#1`, a URL's fragment, or an
 * HTML entity `&#39;`). Only prose is scanned (comments; markdown outside code blocks), where a
 * CSS colour such as `#333` does not occur.
 */
export const issueReference = /\b(?:issues?|PRs?|pull requests?)\s+#?\d+\b|(?:^|[\s([])#\d+\b/i

/** A pointer into the spec, which the user does not have: the docs say the rule itself. */
export const specPointer = /SPEC\s*§/

const numberWord =
  "\\d+|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|a dozen|dozens|tens|hundreds"

/**
 * A figure measured once, quoted in a comment: a time in micro- or nanoseconds, a fractional
 * millisecond time (configured times — "default 5000 ms", "a 5 ms lease" — are whole), a
 * percentage (not percent-encoding's `%E6`), a count of CPU instructions, a count of runtime steps
 * ("some fifteen runtime steps", "where `Effect.map` costs four"), a rate per second, a ratio
 * ("1.3×", not a power `4.5 × 10^15`), a before → after pair, a median or percentile, or the word
 * "measured" itself.
 */
export const figurePatterns: ReadonlyArray<RegExp> = [
  /\d[\d.,]*\s*(?:µs|μs|ns)\b/,
  /\d+\.\d+\s*ms\b/,
  /(?<![\w%])\d(?:[\d.,]*\d)?\s*%/,
  /\d[^.;]*\binstructions\b|\binstructions\b[^.;]*\d/i,
  new RegExp(`\\b(?:${numberWord})\\s+(?:\\w+\\s+)?(?:runtime\\s+)?steps?\\b`, "i"),
  new RegExp(`\\bsteps?\\b.*\\b(?:takes|costs?|cost)\\s+(?:some\\s+)?(?:${numberWord})\\b`, "i"),
  /\d[\d.,]*\s*k?\s*(?:[a-z]+\s*)?\/\s*s\b|\bper second\b/i,
  /\d(?:\.\d+)?\s*×(?!\s*10\^)|\b\d+(?:\.\d+)?x\s+(?:faster|slower|fewer|more|less)\b/,
  /\d[\d.,]*\s*(?:→|->)\s*~?\d/,
  /\b(?:median|p50|p90|p95|p99)\b/i,
  /\bmeasured\b/i
]

/**
 * Whether a line quotes a measured figure (any of `figurePatterns`). With `next` (the comment's
 * next line), a figure that starts on this line and ends on the next ("some fifteen runtime /
 * steps") counts for this line.
 */
export const quotesFigure = (text: string, next = ""): boolean => {
  const window = next === "" ? text : `${text} ${next}`
  return figurePatterns.some((pattern) => {
    const match = pattern.exec(window)
    return match !== null && match.index < text.length
  })
}

/** The comment lines of `lines` (one file's, in order) that quote a measured figure. */
export const figureLines = (lines: ReadonlyArray<ProseLine>): Array<ProseLine> =>
  lines.filter((line, i) => {
    const after = lines[i + 1]
    const next = after !== undefined && after.file === line.file && after.line === line.line + 1
      ? after.text.replace(/^(?:\/\/+|\/\*+|\*+)\s*/, "")
      : ""
    return quotesFigure(line.text, next)
  })

/** The files under `dir` (relative to `root`) whose names end with `extension`, recursively. */
export const filesUnder = (root: string, dir: string, extension: string): Array<string> => {
  const full = path.join(root, dir)
  if (!fs.existsSync(full)) return []
  return fs.readdirSync(full, { withFileTypes: true }).flatMap((entry) => {
    const relative = path.join(dir, entry.name)
    return entry.isDirectory()
      ? filesUnder(root, relative, extension)
      : entry.name.endsWith(extension)
      ? [relative]
      : []
  })
}

/**
 * The comment lines of a TypeScript source, found by the compiler's parser (so `//` inside a
 * string or a template, such as a URL, is no comment): each line of each comment, once.
 */
export const commentLines = (file: string, text: string): Array<ProseLine> => {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const seen = new Set<number>()
  const lines: Array<ProseLine> = []
  const take = (ranges: ReadonlyArray<ts.CommentRange> | undefined) => {
    for (const range of ranges ?? []) {
      if (seen.has(range.pos)) continue
      seen.add(range.pos)
      const first = source.getLineAndCharacterOfPosition(range.pos).line
      text.slice(range.pos, range.end).split("\n").forEach((line, i) => {
        lines.push({ file, line: first + i + 1, text: line.trim() })
      })
    }
  }
  const visit = (node: ts.Node) => {
    take(ts.getLeadingCommentRanges(text, node.getFullStart()))
    take(ts.getTrailingCommentRanges(text, node.getEnd()))
    ts.forEachChild(node, visit)
  }
  visit(source)
  take(ts.getLeadingCommentRanges(text, source.endOfFileToken.getFullStart()))
  return lines.sort((a, b) => a.line - b.line)
}

/** The prose lines of a markdown text: every line outside fenced code blocks. */
export const markdownLines = (file: string, text: string): Array<ProseLine> => {
  const lines: Array<ProseLine> = []
  let fence: string | undefined
  text.split("\n").forEach((line, i) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1]
    if (marker !== undefined && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined
      return
    }
    if (fence === undefined) lines.push({ file, line: i + 1, text: line })
  })
  return lines
}

/** `file:line: text`, for a failure message that points at each offending line. */
export const where = (lines: ReadonlyArray<ProseLine>): string =>
  lines.map((line) => `${line.file}:${line.line}: ${line.text}`).join("\n")
