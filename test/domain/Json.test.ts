import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import { canonicalize, DefaultMaxBodyBytes, parseStored } from "../../src/domain/Json.js"
import { leftOf, rightOf } from "./fixtures.js"
import { prng } from "../../scenarios/support/prng.js"

/** fc.jsonValue() only yields finite numbers; JSON has no -0, so -0 comes back as 0. */
const withoutNegativeZero = (v: unknown): unknown => {
  if (typeof v === "number") return Object.is(v, -0) ? 0 : v
  if (Array.isArray(v)) return v.map(withoutNegativeZero)
  if (v !== null && typeof v === "object") {
    return Object.fromEntries(Object.keys(v).map((k) => [k, withoutNegativeZero((v as Record<string, unknown>)[k])]))
  }
  return v
}


/** The same JSON value rebuilt with every object's keys inserted in a shuffled order. */
const shuffleKeys = (v: unknown, random: () => number): unknown => {
  if (Array.isArray(v)) return v.map((x) => shuffleKeys(x, random))
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v)
    for (let i = keys.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1))
      const tmp = keys[i]!
      keys[i] = keys[j]!
      keys[j] = tmp
    }
    return Object.fromEntries(keys.map((k) => [k, shuffleKeys((v as Record<string, unknown>)[k], random)]))
  }
  return v
}

/** JSON values with ASCII strings and keys, and with arbitrary Unicode (astral, lone surrogates). */
const jsonArb = fc.oneof(fc.jsonValue(), fc.jsonValue({ stringUnit: "binary" }), fc.jsonValue({ stringUnit: "grapheme" }))

const isRejected = (value: unknown) => Either.isLeft(canonicalize(value))

describe("canonicalize", () => {
  it("renders sorted keys without spaces", () => {
    const body = rightOf(canonicalize({ b: 1, a: [true, null, "x"], c: { z: 0, y: -1.5 } }))
    expect(body.text).toBe('{"a":[true,null,"x"],"b":1,"c":{"y":-1.5,"z":0}}')
    expect(body.value).toEqual({ a: [true, null, "x"], b: 1, c: { y: -1.5, z: 0 } })
    expect(body.bytes).toBe(body.text.length)
  })

  it("two bodies that differ only in key order have the same text", () => {
    const a = rightOf(canonicalize({ delta: 10, meta: { source: "x", at: 3 } }))
    const b = rightOf(canonicalize({ meta: { at: 3, source: "x" }, delta: 10 }))
    expect(a.text).toBe(b.text)
  })

  it("accepts every kind of JSON scalar at the top level", () => {
    expect(rightOf(canonicalize(null)).text).toBe("null")
    expect(rightOf(canonicalize(true)).text).toBe("true")
    expect(rightOf(canonicalize(false)).text).toBe("false")
    expect(rightOf(canonicalize(0)).text).toBe("0")
    expect(rightOf(canonicalize("hé")).text).toBe('"hé"')
    expect(rightOf(canonicalize([])).text).toBe("[]")
    expect(rightOf(canonicalize({})).text).toBe("{}")
  })

  it("accepts objects without a prototype", () => {
    const o = Object.create(null) as Record<string, unknown>
    o["b"] = 2
    o["a"] = 1
    expect(rightOf(canonicalize(o)).text).toBe('{"a":1,"b":2}')
  })

  it("keeps a \"__proto__\" key that came from JSON.parse as an ordinary key", () => {
    const body = rightOf(canonicalize(JSON.parse('{"z":1,"__proto__":{"x":2}}')))
    expect(body.text).toBe('{"__proto__":{"x":2},"z":1}')
  })

  it("rejects absurdly deep nesting with a message instead of throwing", () => {
    let deep: unknown = 0
    for (let i = 0; i < 10_000; i++) deep = [deep]
    expect(() => canonicalize(deep)).not.toThrow()
    expect(isRejected(deep)).toBe(true)
  })

  it("accepts the same object referenced twice (sharing is not a cycle)", () => {
    const shared = { x: 1 }
    expect(rightOf(canonicalize({ p: shared, q: [shared, shared] })).text).toBe('{"p":{"x":1},"q":[{"x":1},{"x":1}]}')
  })

  it.prop(
    "key order does not matter: shuffled keys give the same text",
    [jsonArb, fc.integer()],
    ([value, seed]) => {
      const original = rightOf(canonicalize(value))
      const shuffled = rightOf(canonicalize(shuffleKeys(value, prng(seed))))
      expect(shuffled.text).toBe(original.text)
      expect(shuffled.bytes).toBe(original.bytes)
    }
  )

  it.prop("round trip: parsing the text gives back the input (modulo -0)", [jsonArb], ([value]) => {
    const body = rightOf(canonicalize(value))
    const expected = withoutNegativeZero(value)
    expect(JSON.parse(body.text)).toEqual(expected)
    expect(parseStored(body.text)).toEqual(expected)
    expect(body.value).toEqual(expected)
  })

  it.prop("canonical text is a fixed point", [jsonArb], ([value]) => {
    const body = rightOf(canonicalize(value))
    expect(rightOf(canonicalize(JSON.parse(body.text))).text).toBe(body.text)
  })

  it.prop("bytes is the UTF-8 length of the text", [jsonArb], ([value]) => {
    const body = rightOf(canonicalize(value))
    expect(body.bytes).toBe(Buffer.byteLength(body.text, "utf8"))
  })

  describe("rejects what is not plain JSON", () => {
    it("functions", () => {
      expect(isRejected(() => 1)).toBe(true)
      expect(isRejected({ f: function named() {} })).toBe(true)
      expect(isRejected([1, () => 2])).toBe(true)
    })

    it("NaN, Infinity and -Infinity, at the top level and nested", () => {
      for (const n of [Number.NaN, Infinity, -Infinity]) {
        expect(isRejected(n), String(n)).toBe(true)
        expect(isRejected({ delta: n }), String(n)).toBe(true)
        expect(isRejected([0, n]), String(n)).toBe(true)
        expect(isRejected({ a: { b: [n] } }), String(n)).toBe(true)
      }
    })

    it("undefined, at the top level and nested", () => {
      expect(isRejected(undefined)).toBe(true)
      expect(isRejected({ a: undefined })).toBe(true)
      expect(isRejected({ a: 1, b: { c: undefined } })).toBe(true)
      expect(isRejected([undefined])).toBe(true)
    })

    it("cycles through objects and arrays", () => {
      const o: Record<string, unknown> = { a: 1 }
      o["self"] = o
      expect(isRejected(o)).toBe(true)
      const arr: Array<unknown> = [1]
      arr.push(arr)
      expect(isRejected(arr)).toBe(true)
      const deep: Record<string, unknown> = {}
      deep["x"] = { y: [{ back: deep }] }
      expect(isRejected(deep)).toBe(true)
    })

    it("symbols as values and as keys", () => {
      expect(isRejected(Symbol("s"))).toBe(true)
      expect(isRejected({ s: Symbol("s") })).toBe(true)
      expect(isRejected({ [Symbol("k")]: 1, a: 1 })).toBe(true)
    })

    it("bigints", () => {
      expect(isRejected(1n)).toBe(true)
      expect(isRejected({ n: 10n })).toBe(true)
    })

    it("Date, Map, Set and class instances", () => {
      class Money {
        constructor(readonly cents: number) {}
      }
      for (const v of [new Date(0), new Map([["a", 1]]), new Set([1]), new Money(5), /re/, new Uint8Array(2)]) {
        expect(isRejected(v), String(v)).toBe(true)
        expect(isRejected({ nested: v }), String(v)).toBe(true)
      }
    })

    it("sparse arrays", () => {
      // eslint-disable-next-line no-sparse-arrays
      expect(isRejected([1, , 3])).toBe(true)
      expect(isRejected(new Array(3))).toBe(true)
      expect(isRejected({ items: new Array(1) })).toBe(true)
    })

    it("rejections are reported as a message, not thrown", () => {
      const message = leftOf(canonicalize({ a: Number.NaN }))
      expect(typeof message).toBe("string")
      expect(message.length).toBeGreaterThan(0)
    })
  })

  describe("size limit", () => {
    it("the default limit is 1 MiB", () => {
      expect(DefaultMaxBodyBytes).toBe(1024 * 1024)
      // A string body renders with two quotes.
      const atLimit = "a".repeat(DefaultMaxBodyBytes - 2)
      expect(rightOf(canonicalize(atLimit)).bytes).toBe(DefaultMaxBodyBytes)
      expect(isRejected(atLimit + "a")).toBe(true)
    })

    it("a body at the limit is accepted, one byte over is rejected", () => {
      const body = { delta: 1, note: "abc" }
      const text = '{"delta":1,"note":"abc"}'
      expect(rightOf(canonicalize(body, text.length)).text).toBe(text)
      expect(Either.isLeft(canonicalize(body, text.length - 1))).toBe(true)
    })

    it("counts bytes in UTF-8, not UTF-16 code units", () => {
      // "😀" is 2 UTF-16 code units but 4 UTF-8 bytes; "é" is 1 unit and 2 bytes.
      const emoji = rightOf(canonicalize("😀", 6))
      expect(emoji.bytes).toBe(6)
      expect(Either.isLeft(canonicalize("😀", 5))).toBe(true)
      expect(Either.isLeft(canonicalize("😀", 4))).toBe(true)
      const accent = rightOf(canonicalize({ é: "é" }, 11))
      expect(accent.text).toBe('{"é":"é"}')
      expect(accent.bytes).toBe(11)
      expect(Either.isLeft(canonicalize({ é: "é" }, 10))).toBe(true)
    })

    it.prop(
      "a body is accepted exactly when its UTF-8 text fits the limit",
      [jsonArb, fc.integer({ min: -3, max: 3 })],
      ([value, slack]) => {
        const text = rightOf(canonicalize(value)).text
        const size = Buffer.byteLength(text, "utf8")
        const limit = Math.max(1, size + slack)
        expect(Either.isRight(canonicalize(value, limit))).toBe(size <= limit)
      }
    )
  })
})
