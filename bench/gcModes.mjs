// The harness of bench/asyncPromotion.mjs and bench/generatorMaps.mjs: each mode of a script in
// a child process of its own (with this process's V8 flags) under `--trace-gc-nvp`, and one line
// per mode of what the young generation's collections (scavenges) promoted to the old one — what
// they found alive — with the time the child printed (`took N ms`).
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"

/** Runs `script` (an `import.meta.url`) once per mode with `iterations`; `unit` names an iteration. */
export const runModes = (script, modes, iterations, unit) => {
  const width = Math.max(...modes.map((mode) => mode.length))
  for (const mode of modes) {
    const trace = execFileSync(process.execPath, [...process.execArgv, "--trace-gc-nvp", fileURLToPath(script), mode, iterations], { encoding: "utf8" })
    let promoted = 0
    let scavenges = 0
    let pause = 0
    for (const line of trace.split("\n")) {
      if (!/\bgc=(s|mmc)\b/.test(line)) continue
      scavenges++
      promoted += Number(/\bpromoted=(\d+)/.exec(line)?.[1] ?? 0)
      pause += Number(/\bpause=([\d.]+)/.exec(line)?.[1] ?? 0)
    }
    const ms = /^took (\d+) ms$/m.exec(trace)?.[1]
    console.log(`${mode.padEnd(width)} ${iterations} ${unit}: ${ms} ms; ${scavenges} scavenges, ${(promoted / 1e6).toFixed(1)} MB promoted, ${pause.toFixed(0)} ms paused`)
  }
}
