/**
 * HTML built from templates whose interpolations are escaped unless they are already `Html`, so
 * store data (ids, reasons, bodies are user data) can never become markup by accident.
 */

/** A fragment of markup that is safe to insert as is. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

const replacements: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  "\"": "&quot;",
  "'": "&#39;",
  "`": "&#96;"
}

/** Escapes text for an element body or a quoted attribute value. */
export const escape = (text: string): string => text.replace(/[&<>"'`]/g, (c) => replacements[c]!)

/** What a template may interpolate: text (escaped), markup, numbers, nothing, or lists of these. */
export type Part = Html | string | number | boolean | null | undefined | ReadonlyArray<Part>

const render = (part: Part): string => {
  if (part === null || part === undefined || part === false || part === true) return ""
  if (part instanceof Html) return part.text
  if (typeof part === "number") return escape(String(part))
  if (typeof part === "string") return escape(part)
  return part.map(render).join("")
}

/** The template tag: `html\`<td>${eventId}</td>\`` escapes `eventId`. */
export const html = (strings: TemplateStringsArray, ...parts: ReadonlyArray<Part>): Html => {
  let out = strings[0]!
  for (let i = 0; i < parts.length; i++) out += render(parts[i]!) + strings[i + 1]!
  return new Html(out)
}

/** Markup the caller vouches for (constant strings of this module only). */
export const raw = (text: string): Html => new Html(text)

/** A query string from defined values (`?a=1&b=x`), or "" when there are none. */
export const query = (params: Record<string, string | number | undefined>): string => {
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== "") search.set(key, String(value))
  const text = search.toString()
  return text === "" ? "" : `?${text}`
}
