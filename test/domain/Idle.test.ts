/**
 * The idle worker's sleep (`Idle.idleSleep`): a wake-up time in the future is honoured (up to the
 * poll interval), no wake-up time means the poll interval, and a run of immediate wake-ups (every
 * eligible head held by other writers) backs off — at once, then 1, 2, 4 … ms, capped — and
 * starts over after any other answer.
 */
import { describe, expect, it } from "vitest"
import { ContendedCapMillis, idleSleep } from "../../src/domain/Idle.js"

const poll = 1_000
const now = 50_000

/** The sleeps of `n` immediate wake-ups in a row. */
const run = (n: number, pollMillis = poll) => {
  const sleeps: Array<number> = []
  let inARow = 0
  for (let i = 0; i < n; i++) {
    const sleep = idleSleep(now + 1, now, pollMillis, inARow)
    sleeps.push(sleep.millis)
    inARow = sleep.inARow
  }
  return { sleeps, inARow }
}

describe("idleSleep", () => {
  it("sleeps until a later wake-up time, at most the poll interval, and the poll interval without one", () => {
    expect(idleSleep(now + 250, now, poll, 0)).toEqual({ millis: 250, inARow: 0 })
    expect(idleSleep(now + 60_000, now, poll, 0)).toEqual({ millis: poll, inARow: 0 })
    expect(idleSleep(undefined, now, poll, 0)).toEqual({ millis: poll, inARow: 0 })
  })

  it("takes the first immediate wake-up at once, then doubles from 1 ms up to the cap", () => {
    expect(run(10).sleeps).toEqual([1, 1, 2, 4, 8, 16, 32, 64, 64, 64])
    expect(ContendedCapMillis).toBe(64)
    // A wake-up time already past is at once too.
    expect(idleSleep(now - 5, now, poll, 0)).toEqual({ millis: 0, inARow: 1 })
  })

  it("never sleeps longer than the poll interval", () => {
    expect(run(10, 5).sleeps).toEqual([1, 1, 2, 4, 5, 5, 5, 5, 5, 5])
  })

  it("starts over after a later wake-up time or none", () => {
    const { inARow } = run(6)
    expect(idleSleep(now + 300, now, poll, inARow)).toEqual({ millis: 300, inARow: 0 })
    expect(idleSleep(undefined, now, poll, inARow)).toEqual({ millis: poll, inARow: 0 })
    expect(idleSleep(now + 1, now, poll, 0).millis).toBe(1)
  })
})
