import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Either, Schema, FastCheck as fc } from "effect"
import { EventId, FlowId, Generation, MaxIdLength, Seq, Tick } from "../../src/domain/Ids.js"

const accepts = (schema: Schema.Schema<any, any>, s: unknown) => Either.isRight(Schema.decodeUnknownEither(schema)(s))

const ordinaryIds = ["A", "A1", "B", "order-42", "tenant:7/account.9", "évènement", "账户-1", "emoji-😀", "x".repeat(MaxIdLength)]
const controlCharacters = ["\u0000", "\u0001", "\t", "\n", "\r", "\u001b", "\u001f", "\u007f", "\u0080", "\u0085", "\u009f"]

// A printable, non-control, non-blank alphabet for property tests.
const safeChar = fc.constantFrom(..."ABCXYZabcxyz0189-_.:/@#αβ账😀".split(/(?:)/u))

describe.each([
  ["EventId", EventId as unknown as Schema.Schema<string>],
  ["FlowId", FlowId as unknown as Schema.Schema<string>]
] as const)("%s", (_name, schema) => {
  it("accepts ordinary ids, up to 200 characters", () => {
    expect(MaxIdLength).toBe(200)
    for (const id of ordinaryIds) expect(accepts(schema, id), id).toBe(true)
  })

  it("rejects the empty id", () => {
    expect(accepts(schema, "")).toBe(false)
  })

  it("rejects blank ids", () => {
    for (const id of [" ", "   ", "\u00a0", "\u3000", " \u2003 "]) expect(accepts(schema, id), JSON.stringify(id)).toBe(false)
  })

  it("rejects ids longer than 200 characters", () => {
    expect(accepts(schema, "x".repeat(200))).toBe(true)
    expect(accepts(schema, "x".repeat(201))).toBe(false)
    expect(accepts(schema, "y".repeat(10_000))).toBe(false)
  })

  it("rejects ids containing control characters (C0, DEL, C1)", () => {
    for (const c of controlCharacters) {
      expect(accepts(schema, c), JSON.stringify(c)).toBe(false)
      expect(accepts(schema, `A${c}1`), JSON.stringify(`A${c}1`)).toBe(false)
      expect(accepts(schema, `A1${c}`), JSON.stringify(`A1${c}`)).toBe(false)
    }
  })

  it("rejects non-strings", () => {
    for (const v of [undefined, null, 1, {}, ["A"]]) expect(accepts(schema, v)).toBe(false)
  })

  it.prop(
    "accepts every id of 1 to 200 printable characters",
    [fc.array(safeChar, { minLength: 1, maxLength: 100 })],
    ([chars]) => {
      const id = chars.join("").slice(0, MaxIdLength)
      expect(accepts(schema, id)).toBe(true)
    }
  )

  it.prop(
    "rejects any id into which a control character is inserted",
    [fc.array(safeChar, { minLength: 1, maxLength: 50 }), fc.constantFrom(...controlCharacters), fc.nat()],
    ([chars, c, at]) => {
      const base = chars.join("")
      const i = at % (base.length + 1)
      expect(accepts(schema, base.slice(0, i) + c + base.slice(i))).toBe(false)
    }
  )

  it.prop("rejects every id longer than 200 characters", [fc.integer({ min: 201, max: 2_000 })], ([n]) => {
    expect(accepts(schema, "a".repeat(n))).toBe(false)
  })

  it.prop("values generated from the schema decode and are never blank", [Arbitrary.make(schema)], ([id]) => {
    expect(accepts(schema, id)).toBe(true)
    expect(id.trim().length).toBeGreaterThan(0)
    expect(id.length).toBeLessThanOrEqual(MaxIdLength)
  })
})

describe("counters", () => {
  it("a tick is a non-negative integer", () => {
    for (const ok of [0, 1, 5, 1_700_000_000_000]) expect(accepts(Tick, ok)).toBe(true)
    for (const bad of [-1, 1.5, Number.NaN, Infinity]) expect(accepts(Tick, bad)).toBe(false)
  })

  it("a seq starts at 1", () => {
    expect(accepts(Seq, 1)).toBe(true)
    expect(accepts(Seq, 0)).toBe(false)
    expect(accepts(Seq, 2.5)).toBe(false)
  })

  it("a generation starts at 0", () => {
    expect(accepts(Generation, 0)).toBe(true)
    expect(accepts(Generation, -1)).toBe(false)
  })
})
