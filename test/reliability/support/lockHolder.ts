/**
 * A child process that holds a SQLite file's write lock for the storage-fault tests:
 * `node --import tsx lockHolder.ts <file>`, then JSON-line commands on stdin:
 *
 *   {cmd: "lock"}                 BEGIN IMMEDIATE, answer `locked`; hold until `release`
 *   {cmd: "release"}              COMMIT, answer `released`
 *   {cmd: "hold", ms, tickToNow}  BEGIN IMMEDIATE, answer `locked`, wait `ms`, optionally set the
 *                                 queue's persisted tick to this process's clock (a concurrent
 *                                 writer that read its time later), COMMIT, answer `released`
 *
 * End of stdin: exit 0.
 */
import Database from "better-sqlite3"
import { commands, emit, runMain, stringField } from "../../../scenarios/processes/io.js"

const main = async () => {
  const file = process.argv[2]
  if (file === undefined) throw new Error("usage: lockHolder <file>")
  const db = new Database(file, { fileMustExist: true })
  db.pragma("busy_timeout = 10000")
  const input = commands()
  emit({ type: "ready", pid: process.pid })
  for (;;) {
    const command = await input.next()
    if (command === undefined) break
    const cmd = stringField(command, "cmd")
    if (cmd === "lock") {
      db.exec("BEGIN IMMEDIATE")
      emit({ type: "locked" })
    } else if (cmd === "release") {
      db.exec("COMMIT")
      emit({ type: "released" })
    } else if (cmd === "hold") {
      db.exec("BEGIN IMMEDIATE")
      emit({ type: "locked" })
      await new Promise((resolve) => setTimeout(resolve, Number(command.ms)))
      if (command.tickToNow === true) db.prepare("UPDATE relay_clock SET tick = MAX(tick, ?) WHERE id = 1").run(Date.now())
      db.exec("COMMIT")
      emit({ type: "released" })
    } else {
      throw new Error(`unknown command ${cmd}`)
    }
  }
  input.close()
  if (db.inTransaction) db.exec("ROLLBACK")
  db.close()
}

runMain(main)
