/** Summary statistics of latency samples (milliseconds). */
export interface Summary {
  readonly n: number
  readonly meanMs: number
  readonly p50Ms: number
  readonly p95Ms: number
  readonly maxMs: number
  /** 1000 / mean: operations per second one after another. */
  readonly perSecond: number
}

const round = (x: number, digits = 4) => Number(x.toFixed(digits))

export const summarize = (samples: ReadonlyArray<number>): Summary => {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
  const mean = sorted.reduce((s, x) => s + x, 0) / Math.max(1, sorted.length)
  return {
    n: sorted.length,
    meanMs: round(mean),
    p50Ms: round(at(0.5)),
    p95Ms: round(at(0.95)),
    maxMs: round(sorted[sorted.length - 1] ?? NaN),
    perSecond: round(1000 / mean, 1)
  }
}

/** Runs `f` until `budgetMs` is spent (at least `minRuns`, at most `maxRuns` times); returns each run's time. */
export const timeRuns = (f: () => void, budgetMs: number, minRuns: number, maxRuns: number): Array<number> => {
  const samples: Array<number> = []
  const started = performance.now()
  while (samples.length < maxRuns && (samples.length < minRuns || performance.now() - started < budgetMs)) {
    const t0 = performance.now()
    f()
    samples.push(performance.now() - t0)
  }
  return samples
}
