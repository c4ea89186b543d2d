/**
 * The ```ts blocks of README.md and docs/*.md, and the programs `readme.test.ts` runs for them.
 *
 * Markers — every block fenced exactly ```ts is compiled strictly and run by node (through tsx),
 * in a fresh directory of its own; a block fenced otherwise (```js, ```sh, ```text, ```typescript)
 * is neither. A ```ts block is a complete program unless the line just above its fence marks it:
 * - `<!-- snippet: in-program … -->`: statements of the Example's `Effect.gen` program; it runs
 *   as the body of an Effect, forked with the Example's layers, until the events it was given are
 *   acked (a `relay.run` daemon), then it is interrupted.
 * - `<!-- snippet: after-example … -->`: module code that continues the Example (its `program`,
 *   `Receiver` and `Live` are in scope); its last line is the Effect to run.
 * The Example is the README's block under the heading `Example` (in its Quick start); its last
 * line (`Effect.runPromise(…)`) is dropped when another block builds on it. Blocks in docs/*.md
 * use the same markers and continue the same README Example. Other markers are refused.
 *
 * The package's imports point at the source: `from "fair-relay"` → src/index.ts, and
 * `from "fair-relay/<entry>"` → src/<entry>.ts. A block that reads `DATABASE_URL` runs against a
 * fresh schema of FAIR_RELAY_PG_URL's database (skipped, saying so, without it). A complete
 * program runs twice on the same files, as a reader would run it again.
 */
import * as path from "node:path"

/** One ```ts block of a markdown file. */
export interface Snippet {
  /** The file, relative to the repository ("README.md", "docs/postgres.md"). */
  readonly file: string
  /** The heading the block sits under, and its position there ("Example", "Run the worker #2"). */
  readonly name: string
  /** The 1-based line of its opening fence in `file`. */
  readonly line: number
  /** The marker's kind, or "complete". */
  readonly kind: "complete" | "in-program" | "after-example"
  readonly code: string
}

/** Every ```ts block of a markdown file, in order. Unknown markers are refused. */
export const extract = (markdown: string, file = "README.md"): Array<Snippet> => {
  const lines = markdown.split("\n")
  const snippets: Array<Snippet> = []
  const perHeading = new Map<string, number>()
  let heading = "(top)"
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    if (/^#{1,6} /.test(line)) heading = line.replace(/^#+ /, "").trim()
    if (line.trim() !== "```ts") continue
    const end = lines.findIndex((candidate, j) => j > i && candidate.trim() === "```")
    if (end < 0) throw new Error(`${file}:${i + 1}: unterminated \`\`\`ts block`)
    const marker = /^<!--\s*snippet:\s*([\w-]+)/.exec(lines[i - 1] ?? "")?.[1]
    if (marker !== undefined && marker !== "in-program" && marker !== "after-example") {
      throw new Error(`${file}:${i}: unknown snippet marker "${marker}" (in-program | after-example)`)
    }
    const count = (perHeading.get(heading) ?? 0) + 1
    perHeading.set(heading, count)
    snippets.push({
      file,
      name: count === 1 ? heading : `${heading} #${count}`,
      line: i + 1,
      kind: marker ?? "complete",
      code: lines.slice(i + 1, end).join("\n")
    })
    i = end
  }
  return snippets
}

/**
 * A snippet's imports of the package, pointed at the source: `fair-relay` → the relative path of
 * src/index.js, `fair-relay/<entry>` → src/<entry>.js (tsx and NodeNext typechecking both map
 * them to the .ts files), as the package's `exports` map them to dist/.
 */
export const fromSource = (code: string, file: string, srcIndex: string): string => {
  const target = (entry: string) => {
    const relative = path.relative(path.dirname(file), path.join(path.dirname(srcIndex), `${entry}.js`)).split(path.sep).join("/")
    return JSON.stringify(relative.startsWith(".") ? relative : `./${relative}`)
  }
  return code
    .replaceAll(/from "fair-relay"/g, () => `from ${target("index")}`)
    .replaceAll(/from "fair-relay\/([a-z]+)"/g, (_, entry: string) => `from ${target(entry)}`)
}

/** The Example without its last line, which runs it (`Effect.runPromise(program…)`). */
export const prelude = (example: Snippet): string => {
  const lines = example.code.trimEnd().split("\n")
  const last = lines.pop() ?? ""
  if (!last.startsWith("Effect.runPromise(")) {
    throw new Error(`the Example's last line must run it with Effect.runPromise(…), found: ${last}`)
  }
  return lines.join("\n")
}

/** The events an in-program snippet's daemon must ack before it is interrupted. */
export const DaemonEvents = ["readme-daemon:1", "readme-daemon:2", "readme-daemon:3"] as const

/** The line an in-program run prints once its daemon acked every event and was interrupted. */
export const DaemonDone = "readme: the daemon acked every event and stopped on interruption"

/** The program that runs one snippet (the Example is needed for the marked kinds). */
export const program = (snippet: Snippet, example: Snippet): string => {
  switch (snippet.kind) {
    case "complete":
      return snippet.code
    case "after-example": {
      const lines = snippet.code.trimEnd().split("\n")
      const last = lines.pop() ?? ""
      return [prelude(example), ...lines, `await Effect.runPromise(${last})`].join("\n")
    }
    case "in-program":
      return [
        prelude(example),
        `import { Cause as ReadmeCause, Effect as ReadmeEffect, Fiber as ReadmeFiber } from "effect"`,
        `import { RelayQueue as ReadmeQueue } from "fair-relay"`,
        `const readmeFragment = ReadmeEffect.gen(function* () {`,
        snippet.code,
        `})`,
        `await ReadmeEffect.runPromise(ReadmeEffect.gen(function* () {`,
        `  const queue = yield* ReadmeQueue`,
        `  const ids = ${JSON.stringify(DaemonEvents)}`,
        `  for (const [i, eventId] of ids.entries()) {`,
        `    yield* queue.enqueue({ eventId, flowId: "readme-daemon", body: { delta: i + 1 } })`,
        `  }`,
        `  const fiber = yield* ReadmeEffect.fork(readmeFragment)`,
        `  for (;;) {`,
        `    const exit = yield* ReadmeFiber.poll(fiber)`,
        `    if (exit._tag === "Some") {`,
        `      const cause = exit.value._tag === "Failure" ? ReadmeCause.pretty(exit.value.cause) : "success"`,
        `      return yield* ReadmeEffect.dieMessage("the daemon stopped by itself: " + cause)`,
        `    }`,
        `    const stats = yield* queue.stats`,
        `    if (stats.byState.acked === ids.length) break`,
        `    yield* ReadmeEffect.sleep("20 millis")`,
        `  }`,
        `  yield* ReadmeFiber.interrupt(fiber)`,
        `  console.log(${JSON.stringify(DaemonDone)})`,
        `}).pipe(ReadmeEffect.provide(Live)))`
      ].join("\n")
  }
}
