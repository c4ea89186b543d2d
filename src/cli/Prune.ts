/**
 * `fair-relay prune`: deletes what the queue's retention lets go — acked events older than 7 days
 * (each leaves a dedup record) and dedup records older than 30 days, or the store's windows once
 * `fair-relay policy --retain-acked/--retain-dedup` set them — in small transactions.
 * `--dry-run` opens the store read-only and only counts.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Effect } from "effect"
import * as fs from "node:fs"
import { context, print, printJson, shared } from "./Common.js"
import * as Store from "./Store.js"

/** Size in bytes of a SQLite store and its write-ahead log (undefined on PostgreSQL). */
const sizeOf = (db: string): number | undefined =>
  Store.isPostgres(db) ? undefined : [db, `${db}-wal`].reduce((sum, f) => sum + (fs.existsSync(f) ? fs.statSync(f).size : 0), 0)

/** `prune`. */
export const prune = Command.make("prune", {
  ...shared,
  dryRun: Options.boolean("dry-run").pipe(Options.withDescription("Only count what would be deleted (the store is opened read-only)."))
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* (options.dryRun ? Store.openReader(db) : Store.openWriter(db))
    const result = yield* queue.prune({ dryRun: options.dryRun })
    const bytes = sizeOf(db)
    if (json) return yield* printJson({ db: Store.masked(db), ...result, ...(bytes === undefined ? {} : { bytes }) })
    const verb = options.dryRun ? "dry run: would delete" : "deleted"
    yield* print(
      `${verb} ${result.events} acked event${result.events === 1 ? "" : "s"} and ${result.dedup} expired dedup record${
        result.dedup === 1 ? "" : "s"
      }${bytes === undefined ? "" : ` (store: ${bytes} bytes; freed pages are reused)`}`
    )
  }))).pipe(Command.withDescription("Delete acked events past the retention window (7 days, or the store's) in small batches; --dry-run only counts."))
