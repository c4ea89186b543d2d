/**
 * `fair-relay clock`: the store's persisted tick next to this machine's clock, and `clock reset`,
 * the audited way out when a process with a wrong clock pushed the tick into the future: the tick
 * goes back to now and next_at / lease_until values beyond it are pulled in.
 * A dry run unless `--yes`.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Effect, Option } from "effect"
import { shellCommand } from "../domain/Display.js"
import { isBlankReason } from "../domain/Protocol.js"
import { byOption, context, osUser, print, printJson, reasonOption, shared } from "./Common.js"
import { usage } from "./Errors.js"
import * as Format from "./Format.js"
import * as Store from "./Store.js"

/** Persisted tick, this machine's time, and how far the tick is ahead (negative: behind). */
const reading = (db: string, tick: number, now: number) => ({ db: Store.masked(db), tick, now, aheadMillis: tick - now })

const skewText = (ahead: number): string =>
  ahead > 0
    ? `the store's tick is ${Format.age(ahead)} ahead of this machine`
    : `the store's tick is ${Format.age(-ahead)} behind this machine (normal: it is the last write's time)`

const show = Command.make("clock", shared, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const { db, json } = yield* context(options)
    const queue = yield* Store.openReader(db)
    const { clock } = yield* queue.stats
    const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
    const read = reading(db, clock.tick, now)
    if (json) return yield* printJson(read)
    yield* print([
      Format.fields([["queue store", Store.masked(db)], ["persisted tick", Format.tick(clock.tick)], ["this machine", Format.tick(now)], [
        "skew",
        skewText(read.aheadMillis)
      ]]),
      ...(read.aheadMillis > 0
        ? ["", `a process with a clock ahead wrote it; to bring it back: ${shellCommand(["fair-relay", "clock", "reset", "--reason", "…"])} (dry run; add --yes)`]
        : [])
    ].join("\n"))
  }))).pipe(Command.withDescription("The store's persisted tick next to this machine's clock, and the skew between them."))

const reset = Command.make("reset", {
  ...shared,
  reason: reasonOption("Why the clock is reset; recorded with the reset."),
  by: byOption,
  yes: Options.boolean("yes").pipe(Options.withDescription("Do it (without --yes, only show what would change)."))
}, (options) =>
  Effect.scoped(Effect.gen(function*() {
    const outer = yield* show
    const { db, json } = yield* context({ db: Option.orElse(options.db, () => outer.db), json: options.json || outer.json })
    if (isBlankReason(options.reason)) return yield* usage("MissingReason", "clock reset needs a non-blank --reason")
    const actor = Option.getOrElse(options.by, osUser)
    if (!options.yes) {
      const queue = yield* Store.openReader(db)
      const { clock } = yield* queue.stats
      const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
      const read = reading(db, clock.tick, now)
      if (json) return yield* printJson({ ...read, dryRun: true })
      return yield* print(
        read.aheadMillis > 0
          ? `dry run: would set the tick ${Format.tick(clock.tick)} back to now (${Format.tick(now)}) and pull in waits beyond it; add --yes to do it`
          : `dry run: ${skewText(read.aheadMillis)}; a reset would change nothing but the audit trail (add --yes to do it anyway)`
      )
    }
    const queue = yield* Store.openWriter(db)
    const result = yield* queue.resetClock({ reason: options.reason, actor })
    if (json) return yield* printJson({ db: Store.masked(db), ...result, reason: options.reason, actor })
    yield* print(
      `clock reset: tick ${Format.tick(result.before)} → ${Format.tick(result.after)}, ${result.eventsAdjusted} event${
        result.eventsAdjusted === 1 ? "" : "s"
      } pulled in (by ${actor}: ${options.reason})`
    )
  }))).pipe(Command.withDescription("Set the persisted tick back to now and pull in-future waits in (dry run unless --yes)."))

/** `clock` and `clock reset`. */
export const clock = show.pipe(Command.withSubcommands([reset]))

/** `clock reset`, for its own help. */
export const clockReset = reset
