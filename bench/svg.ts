/**
 * The claim-latency chart (log–log: mean latency against backlog), drawn from a results JSON.
 *
 *   npx tsx bench/svg.ts bench/results/full-….json bench/results/claim-latency.svg
 */
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import type { ClaimResult } from "./claim.js"

/** What the chart needs from a results file. */
export interface ChartInput {
  readonly mode: string
  readonly timestamp: string
  readonly claims: ReadonlyArray<ClaimResult>
  /** The raw commit ceiling measured between the claim rounds. */
  readonly claimCeiling: { readonly meanCommitMs: number }
}

interface Series {
  readonly name: string
  readonly color: string
  /** Where the value labels sit: above (−) or below (+) the points, px. */
  readonly labelDy: number
  readonly points: ReadonlyArray<readonly [number, number]>
}

const W = 860
const H = 470
const M = { left: 74, right: 270, top: 56, bottom: 70 }

const fmtMs = (ms: number) =>
  ms < 0.01 ? `${(ms * 1000).toFixed(1)} µs`
  : ms < 1 ? `${(ms * 1000).toFixed(0)} µs`
  : ms < 1000 ? `${ms.toPrecision(3)} ms`
  : `${(ms / 1000).toPrecision(3)} s`

const decadeLabel = (d: number) =>
  d >= 3 ? `${10 ** (d - 3)} s` : d >= 0 ? `${10 ** d} ms` : d >= -3 ? `${10 ** (d + 3)} µs` : `${10 ** (d + 6)} ns`

const fmtCount = (n: number) => (n >= 1e6 ? `${n / 1e6}M` : n >= 1e3 ? `${n / 1e3}k` : String(n))

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

export const chart = (input: ChartInput): string => {
  const rows = [...input.claims].sort((a, b) => a.events - b.events)
  const ceilingMs = input.claimCeiling.meanCommitMs
  const series: Array<Series> = [
    { name: "article's head query (read-only)", color: "#d62728", labelDy: -8, points: rows.map((r) => [r.events, r.articleQuery.meanMs]) },
    { name: "our claim (durable write txn)", color: "#1f77b4", labelDy: 17, points: rows.map((r) => [r.events, r.ourClaim.meanMs]) },
    { name: "our turn query (read-only)", color: "#2ca02c", labelDy: -8, points: rows.map((r) => [r.events, r.ourTurnQuery.meanMs]) }
  ]
  const xs = rows.map((r) => r.events)
  const ys = series.flatMap((s) => s.points.map(([, y]) => y)).concat(ceilingMs)
  const x0 = Math.floor(Math.log10(Math.min(...xs))) - 0.25
  const x1 = Math.ceil(Math.log10(Math.max(...xs))) + 0.25
  const y0 = Math.floor(Math.log10(Math.min(...ys)))
  const y1 = Math.ceil(Math.log10(Math.max(...ys)))
  const pw = W - M.left - M.right
  const ph = H - M.top - M.bottom
  const px = (x: number) => M.left + ((Math.log10(x) - x0) / (x1 - x0)) * pw
  const py = (y: number) => M.top + ph - ((Math.log10(y) - y0) / (y1 - y0)) * ph
  const out: Array<string> = []
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`)
  out.push(`<rect width="${W}" height="${H}" fill="#fff"/>`)
  out.push(`<text x="${M.left}" y="24" font-size="15" font-weight="bold">Claim latency vs backlog (log–log, mean)</text>`)
  out.push(`<text x="${M.left}" y="42" fill="#555">${esc(`${input.mode} run ${input.timestamp}; SQLite WAL + synchronous=FULL`)}</text>`)
  for (let d = y0; d <= y1; d++) {
    const y = py(10 ** d)
    out.push(`<line x1="${M.left}" y1="${y}" x2="${M.left + pw}" y2="${y}" stroke="#ddd"/>`)
    out.push(`<text x="${M.left - 8}" y="${y + 4}" text-anchor="end">${decadeLabel(d)}</text>`)
  }
  for (const row of rows) {
    const x = px(row.events)
    out.push(`<line x1="${x}" y1="${M.top}" x2="${x}" y2="${M.top + ph}" stroke="#eee"/>`)
    out.push(`<text x="${x}" y="${M.top + ph + 18}" text-anchor="middle">${fmtCount(row.events)} events</text>`)
    out.push(`<text x="${x}" y="${M.top + ph + 33}" text-anchor="middle" fill="#666">${fmtCount(row.flows)} flows</text>`)
  }
  out.push(`<rect x="${M.left}" y="${M.top}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`)
  out.push(`<text x="${M.left + pw / 2}" y="${H - 12}" text-anchor="middle">backlog (events)</text>`)
  out.push(`<text transform="translate(18 ${M.top + ph / 2}) rotate(-90)" text-anchor="middle">mean latency per claim / query</text>`)
  const cy = py(ceilingMs)
  out.push(`<line x1="${M.left}" y1="${cy}" x2="${M.left + pw}" y2="${cy}" stroke="#999" stroke-dasharray="6 4"/>`)
  out.push(`<text x="${M.left + pw - 6}" y="${cy + 15}" text-anchor="end" fill="#777">one raw durable commit (${fmtMs(ceilingMs)})</text>`)
  series.forEach((s, i) => {
    const path = s.points.map(([x, y], k) => `${k === 0 ? "M" : "L"}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" ")
    out.push(`<path d="${path}" fill="none" stroke="${s.color}" stroke-width="2.2"/>`)
    for (const [x, y] of s.points) {
      out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3.5" fill="${s.color}"/>`)
      out.push(`<text x="${(px(x) + 6).toFixed(1)}" y="${(py(y) + s.labelDy).toFixed(1)}" fill="${s.color}" font-size="11">${fmtMs(y)}</text>`)
    }
    const ly = M.top + 10 + i * 22
    out.push(`<line x1="${M.left + pw + 16}" y1="${ly}" x2="${M.left + pw + 40}" y2="${ly}" stroke="${s.color}" stroke-width="2.2"/>`)
    out.push(`<text x="${M.left + pw + 46}" y="${ly + 4}">${esc(s.name)}</text>`)
  })
  const ly = M.top + 10 + series.length * 22
  out.push(`<line x1="${M.left + pw + 16}" y1="${ly}" x2="${M.left + pw + 40}" y2="${ly}" stroke="#999" stroke-dasharray="6 4"/>`)
  out.push(`<text x="${M.left + pw + 46}" y="${ly + 4}">raw commit (better-sqlite3)</text>`)
  out.push(`</svg>`)
  return out.join("\n") + "\n"
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [from, to] = process.argv.slice(2)
  if (from === undefined || to === undefined) {
    console.error("usage: tsx bench/svg.ts <results.json> <chart.svg>")
    process.exit(2)
  }
  fs.writeFileSync(to, chart(JSON.parse(fs.readFileSync(from, "utf8")) as ChartInput))
  console.log(`wrote ${to}`)
}
