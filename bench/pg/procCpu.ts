/**
 * CPU time from /proc (Linux): what the PostgreSQL benches read for the server's backends and for
 * the threads of their own process.
 */
import * as fs from "node:fs"

/**
 * CPU milliseconds (user + system) of the process or thread whose stat file is `statPath`
 * (`/proc/<pid>/stat`, `/proc/self/task/<tid>/stat`); throws when it is gone. The fields after
 * the command name: state is field 3, utime 14, stime 15 (1-based); 100 ticks a second.
 */
export const procCpuMs = (statPath: string): number => {
  const stat = fs.readFileSync(statPath, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) * (1000 / 100)
}

/**
 * CPU milliseconds of this process's threads other than its main one: V8's collector and
 * compiler helpers and libuv's pool — work a step causes off the main thread, which on a machine
 * of few CPUs takes CPU time from the database server beside it.
 */
export const helperThreadsCpuMs = (): number => {
  let ms = 0
  for (const tid of fs.readdirSync("/proc/self/task")) {
    if (Number(tid) === process.pid) continue
    try {
      ms += procCpuMs(`/proc/self/task/${tid}/stat`)
    } catch {
      // gone
    }
  }
  return ms
}
