/**
 * `TextMap`: values keyed by statement text, looked up by length and then compared. Texts of one
 * length stay apart, a text built afresh finds the value of an equal one, and `size`, `delete`
 * and `entries` agree with what was set.
 */
import { describe, expect, it } from "@effect/vitest"
import * as TextMap from "../../src/layers/internal/TextMap.js"

describe("TextMap", () => {
  it("finds a value by an equal text built afresh; texts of one length stay apart", () => {
    const map = TextMap.make<number>()
    map.set("SELECT a FROM t", 1)
    map.set("SELECT b FROM t", 2)
    map.set("SELECT a FROM tt", 3)
    const built = ["SELECT ", "b", " FROM t"].join("")
    expect(map.get(built)).toBe(2)
    expect(map.get("SELECT a FROM t")).toBe(1)
    expect(map.get("SELECT a FROM tt")).toBe(3)
    expect(map.get("SELECT c FROM t")).toBeUndefined()
    expect(map.size()).toBe(3)
  })

  it("set replaces the value of a text it holds; delete removes only that text", () => {
    const map = TextMap.make<string>()
    map.set("x1", "first")
    map.set("x2", "other")
    map.set("x1", "second")
    expect(map.size()).toBe(2)
    expect(map.get("x1")).toBe("second")
    map.delete("x1")
    map.delete("never set")
    expect(map.get("x1")).toBeUndefined()
    expect(map.get("x2")).toBe("other")
    expect(map.size()).toBe(1)
    expect([...map.entries()]).toStrictEqual([["x2", "other"]])
    map.delete("x2")
    expect(map.size()).toBe(0)
    expect([...map.entries()]).toStrictEqual([])
  })
})
