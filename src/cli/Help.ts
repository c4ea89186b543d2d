/**
 * `--help`, rendered by the CLI itself from @effect/cli's help documents: usage lines that start
 * with `fair-relay <command>`, wrapped to the terminal (80 columns when piped), each option with
 * its own description only (no "A user-defined piece of text." / "This setting is optional."),
 * the command list as name + description, and bold headings only on a terminal without NO_COLOR.
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import type * as HelpDoc from "@effect/cli/HelpDoc"
import type * as Span from "@effect/cli/HelpDoc/Span"
import * as Usage from "@effect/cli/Usage"
import { colorFor } from "./Output.js"

/** How help is laid out. */
export interface Layout {
  /** Columns to wrap at. */
  readonly width: number
  /** Bold headings (a terminal, NO_COLOR unset). */
  readonly color: boolean
}

/** The layout for this process's stdout. */
export const layout = (): Layout => ({
  width: process.stdout.isTTY === true ? Math.max(60, Math.min(120, process.stdout.columns ?? 80)) : 80,
  color: colorFor(process.stdout)
})


// Help text @effect/cli adds to every option, saying nothing about this option.
const boilerplate = [
  /^A user-defined piece of text/,
  /^An integer\.?$/,
  /^A floating point number\.?$/,
  /^A true or false value\.?$/,
  /^A date without a time-zone/,
  /^This setting is optional\./,
  /^This option can be set from environment variables\.?$/
]

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
    case "URI":
      return span.value
    case "Highlight":
    case "Weak":
    case "Strong":
      return spanText(span.value)
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
  }
}

/** The words of a usage line: a bracketed group (`[--max-delta N]`) is one word. */
const usageWords = (text: string): Array<string> => {
  const words: Array<string> = []
  let depth = 0
  let word = ""
  for (const char of text) {
    if (char === "[" || char === "(" || char === "<") depth++
    if (char === "]" || char === ")" || char === ">") depth = Math.max(0, depth - 1)
    if (/\s/.test(char) && depth === 0) {
      if (word !== "") words.push(word)
      word = ""
    } else {
      word += char
    }
  }
  if (word !== "") words.push(word)
  return words
}

/** Greedy word wrap of `text` (or of given words) to `width`, every line indented by `indent`. */
export const wrap = (
  text: string | ReadonlyArray<string>,
  width: number,
  indent = "",
  hanging = indent
): Array<string> => {
  const lines: Array<string> = []
  let line = indent
  let empty = true
  for (const word of typeof text === "string" ? text.split(/\s+/).filter((w) => w !== "") : text) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line)
      line = hanging + word
    } else {
      line = empty ? line + word : `${line} ${word}`
    }
    empty = false
  }
  if (!empty) lines.push(line)
  return lines
}

/** The sections of a help document: heading → blocks. */
interface Section {
  readonly title: string
  readonly blocks: Array<HelpDoc.HelpDoc>
}

const sections = (doc: HelpDoc.HelpDoc): Array<Section> => {
  const out: Array<Section> = []
  const walk = (d: HelpDoc.HelpDoc): void => {
    switch (d._tag) {
      case "Empty":
        return
      case "Sequence":
        walk(d.left)
        walk(d.right)
        return
      case "Header":
        out.push({ title: spanText(d.value), blocks: [] })
        return
      default:
        if (out.length === 0) out.push({ title: "", blocks: [] })
        out[out.length - 1]!.blocks.push(d)
    }
  }
  walk(doc)
  return out
}

const paragraphs = (doc: HelpDoc.HelpDoc): Array<string> => {
  switch (doc._tag) {
    case "Empty":
    case "Header":
      return []
    case "Paragraph":
      return [spanText(doc.value)]
    case "Sequence":
      return [...paragraphs(doc.left), ...paragraphs(doc.right)]
    case "Enumeration":
      return doc.elements.flatMap(paragraphs)
    case "DescriptionList":
      return doc.definitions.flatMap(([term, body]) => [spanText(term), ...paragraphs(body)])
  }
}

/** `--name PSEUDO` followed by its own description. */
const definitions = (doc: HelpDoc.HelpDoc, layout: Layout): Array<string> => {
  if (doc._tag !== "DescriptionList") return paragraphs(doc).flatMap((p) => wrap(p, layout.width, "  "))
  return doc.definitions.flatMap(([term, body]) => {
    const own = paragraphs(body).filter((p) => !boilerplate.some((pattern) => pattern.test(p.trim())))
    return [`  ${spanText(term)}`, ...own.flatMap((p) => wrap(p, layout.width, "      "))]
  })
}

const heading = (title: string, layout: Layout) => (layout.color ? `\u001b[1m${title}\u001b[0m` : title)

const usageLine = (text: string, layout: Layout): Array<string> => wrap(usageWords(text), layout.width, "  $ ", "      ")

/** A command's one-line description (the first paragraph of its DESCRIPTION). */
export const descriptionOf = (command: Command.Command<any, any, any, any>): string =>
  sections(Command.getHelp(command, CliConfig.defaultConfig)).find((s) => s.title === "DESCRIPTION")?.blocks.flatMap(paragraphs)[0] ?? ""

const usageOf = (command: Command.Command<any, any, any, any>): string => {
  const doc = Usage.getHelp(Command.getUsage(command))
  return paragraphs(doc).join(" ")
}

const body = (command: Command.Command<any, any, any, any>, layout: Layout): Array<string> =>
  sections(Command.getHelp(command, CliConfig.make({ showBuiltIns: false }))).flatMap((section) => {
    if (section.title === "DESCRIPTION") {
      return ["", heading("DESCRIPTION", layout), ...section.blocks.flatMap(paragraphs).flatMap((p) => wrap(p, layout.width, "  "))]
    }
    if (section.title === "COMMANDS") return []
    return ["", heading(section.title, layout), ...section.blocks.flatMap((block) => definitions(block, layout))]
  })

/** A named subcommand, as the root's help lists it. */
export interface Entry {
  readonly name: string
  readonly command: Command.Command<any, any, any, any>
  /** Its own subcommands (`clock reset`). */
  readonly children?: ReadonlyArray<Entry> | undefined
}

const commandList = (commands: ReadonlyArray<Entry>, layout: Layout): Array<string> => {
  const nameWidth = Math.max(...commands.map((c) => c.name.length))
  return commands.flatMap((c) =>
    wrap(descriptionOf(c.command), layout.width, `  ${c.name.padEnd(nameWidth)}  `, " ".repeat(nameWidth + 4))
  )
}

/** Help of the root command: usage, description, shared options, the command list, and a footer. */
export const root = (
  program: string,
  version: string,
  parent: Command.Command<any, any, any, any>,
  commands: ReadonlyArray<Entry>,
  footer: ReadonlyArray<string>,
  layout: Layout
): string => {
  return [
    `${heading(program, layout)} ${version}`,
    "",
    heading("USAGE", layout),
    ...usageLine(`${program} [--db DB] [--json] <command> [options]`, layout),
    ...usageLine(`${program} <command> --help`, layout),
    ...body(parent, layout),
    "",
    heading("COMMANDS", layout),
    ...commandList(commands, layout),
    ...(footer.length === 0 ? [] : ["", ...footer.flatMap((p) => wrap(p, layout.width))])
  ].join("\n")
}

/** Help of one command: `fair-relay <name> …` usage, description, arguments and options. */
export const command = (program: string, entry: Entry, layout: Layout): string =>
  [
    heading(`${program} ${entry.name}`, layout),
    "",
    heading("USAGE", layout),
    ...usageLine(`${program} ${usageOf(entry.command)}`, layout),
    ...(entry.children === undefined ? [] : entry.children.flatMap((child) => usageLine(`${program} ${entry.name} ${child.name} --help`, layout))),
    ...body(entry.command, layout),
    ...(entry.children === undefined ? [] : ["", heading("COMMANDS", layout), ...commandList(entry.children, layout)])
  ].join("\n")
