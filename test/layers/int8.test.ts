/**
 * The store's reading of a PostgreSQL `bigint` column (`PgTransactions.int8`) gives what the rows'
 * decoders made of `pg`'s text before (`Number` of it), for every value a `bigint` holds: exact
 * below 2^53, rounded as `Number` rounds above it.
 */
import { FastCheck } from "effect"
import { describe, expect, it } from "vitest"
import { int8 } from "../../src/layers/internal/PgTransactions.js"

const min = -(2n ** 63n)
const max = 2n ** 63n - 1n

describe("int8: a bigint column's text as a number", () => {
  it("is Number(text) at the edges: zero, signs, 15 and 16 digits, the type's bounds", () => {
    for (const text of ["0", "7", "-1", "1764460800000", "999999999999999", "-999999999999999", "1000000000000000", "9007199254740993", String(min), String(max)]) {
      expect(int8(text)).toBe(Number(text))
    }
  })

  it("is Number(text) for any bigint", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.bigInt({ min, max }), (value) => {
        const text = String(value)
        return Object.is(int8(text), Number(text))
      }),
      { numRuns: 5_000 }
    )
    // Short values most of all: the store's ticks, seqs, tickets and counts.
    FastCheck.assert(
      FastCheck.property(FastCheck.integer({ min: -1_000_000, max: 10 ** 13 }), (value) => Object.is(int8(String(value)), value)),
      { numRuns: 5_000 }
    )
  })
})
