/**
 * Event bodies: JSON values, immutable once enqueued, compared canonically.
 */
import { Either, Predicate } from "effect"

/** A JSON value as it is stored and delivered. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

/** A validated body together with its canonical text (sorted keys, no spaces). */
export interface CanonicalBody {
  /** The body as JSON. */
  readonly value: Json
  /** Its canonical text: sorted keys, no spaces. */
  readonly text: string
  /** The text's length in UTF-8 bytes (what `maxBodyBytes` limits). */
  readonly bytes: number
}

/** Default size limit of a canonical body: 1 MiB. */
export const DefaultMaxBodyBytes = 1024 * 1024

const MaxDepth = 256

const describe = (value: unknown): string => {
  if (value === undefined) return "undefined"
  if (typeof value === "number") return String(value)
  if (typeof value === "function") return "a function"
  if (typeof value === "object" && value !== null) return `an instance of ${value.constructor?.name ?? "unknown"}`
  return typeof value
}

/**
 * Checks that `value` is plain JSON and renders it canonically, so that two bodies that differ
 * only in key order are the same body for idempotency. Rejects what JSON.stringify would
 * silently drop or alter: `undefined`, functions, symbols, bigints, non-finite numbers, cycles,
 * class instances (Date, Map, …) and sparse arrays.
 */
export const canonicalize = (value: unknown, maxBytes: number = DefaultMaxBodyBytes): Either.Either<CanonicalBody, string> => {
  const ancestors = new Set<object>()
  const render = (v: unknown, path: string, depth: number): string => {
    if (depth > MaxDepth) throw new BodyError(`${path} nests deeper than ${MaxDepth} levels`)
    if (v === null) return "null"
    switch (typeof v) {
      case "boolean":
        return v ? "true" : "false"
      case "string":
        return JSON.stringify(v)
      case "number":
        if (!Number.isFinite(v)) throw new BodyError(`${path} is ${describe(v)}, which is not a JSON number`)
        return JSON.stringify(v)
      case "object": {
        if (ancestors.has(v)) throw new BodyError(`${path} refers back to itself (a cycle)`)
        ancestors.add(v)
        try {
          if (Array.isArray(v)) {
            const items: Array<string> = []
            for (let i = 0; i < v.length; i++) {
              if (!(i in v)) throw new BodyError(`${path}[${i}] is a hole in a sparse array`)
              items.push(render(v[i], `${path}[${i}]`, depth + 1))
            }
            return `[${items.join(",")}]`
          }
          const proto = Object.getPrototypeOf(v)
          if ((proto !== Object.prototype && proto !== null) || !Predicate.isRecord(v)) {
            throw new BodyError(`${path} is ${describe(v)}, not a plain JSON object`)
          }
          if (Object.getOwnPropertySymbols(v).length > 0) throw new BodyError(`${path} has symbol keys`)
          const keys = Object.keys(v).sort()
          return `{${keys.map((k) => `${JSON.stringify(k)}:${render(v[k], `${path}.${k}`, depth + 1)}`).join(",")}}`
        } finally {
          ancestors.delete(v)
        }
      }
      default:
        throw new BodyError(`${path} is ${describe(v)}, which is not JSON`)
    }
  }
  try {
    const text = render(value, "body", 0)
    const bytes = utf8.encode(text).length
    if (bytes > maxBytes) return Either.left(`body is ${bytes} bytes, above the limit of ${maxBytes}`)
    return Either.right({ value: parseStored(text), text, bytes })
  } catch (error) {
    if (error instanceof BodyError) return Either.left(error.message)
    if (error instanceof RangeError) return Either.left(`body nests too deeply`)
    // A getter or proxy of the caller's that throws: the body cannot be read, so it is not JSON.
    return Either.left(`body cannot be read: ${error instanceof Error ? error.message : String(error)}`)
  }
}

class BodyError extends Error {}

const utf8 = new TextEncoder()

/** Parses a stored canonical body back into a value. */
export const parseStored = (text: string): Json => JSON.parse(text) as Json
