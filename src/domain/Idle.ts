/**
 * How long an idle worker sleeps before its next claim. A claim that found nothing eligible says
 * when the next head becomes eligible (`wakeAt`), or nothing (the worker sleeps its poll
 * interval). A claim that found eligible heads all held by other writers (PostgreSQL parallel
 * claims) answers `wakeAt` one millisecond away: try again at once. A worker that keeps finding
 * them held — an application's open transaction holding the only eligible flow's row, say — backs
 * off instead of claiming every millisecond: each immediate wake-up in a row after the first waits
 * twice as long as the one before (1, 2, 4 … ms), at most `ContendedCapMillis` and never more than
 * the poll interval. A claim that delivers, or any other idle answer, starts the count over.
 */

/** The longest sleep between claims that keep finding every eligible head held. */
export const ContendedCapMillis = 64

/** What the worker sleeps now, and the count of immediate wake-ups in a row to pass to the next call. */
export interface IdleSleep {
  readonly millis: number
  readonly inARow: number
}

/** The sleep after an idle claim answered `wakeAt` at `now`; `inARow` immediate wake-ups came before it. */
export const idleSleep = (wakeAt: number | undefined, now: number, pollMillis: number, inARow: number): IdleSleep => {
  if (wakeAt === undefined) return { millis: pollMillis, inARow: 0 }
  const due = Math.max(0, wakeAt - now)
  if (due > 1) return { millis: Math.min(pollMillis, due), inARow: 0 }
  const millis = inARow === 0 ? due : Math.min(pollMillis, ContendedCapMillis, 2 ** (inARow - 1))
  return { millis, inARow: inARow + 1 }
}
