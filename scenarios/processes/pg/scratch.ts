/**
 * Shared by the measurement scripts of this folder: the database they use (FAIR_RELAY_PG_URL, or
 * exit 2), scratch schemas dropped afterwards, and how a script runs.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Redacted } from "effect"
import type { Scope } from "effect"

const configured = (): string => {
  const url = process.env.FAIR_RELAY_PG_URL
  if (url === undefined) {
    console.error("set FAIR_RELAY_PG_URL (e.g. postgres://postgres@127.0.0.1:5432/fair_relay_test)")
    process.exit(2)
  }
  return url
}

/** The database the scripts measure on. */
export const baseUrl: string = configured()

/** A URL whose connections use `schema` as their search path. */
export const schemaUrl = (schema: string): string => {
  const u = new URL(baseUrl)
  u.searchParams.set("options", `-c search_path=${schema}`)
  return u.toString()
}

/** Creates the schema `name`, dropped when the scope closes; returns its URL. */
export const scratchSchema = (name: string): Effect.Effect<string, unknown, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const admin = yield* PgClient.make({ url: Redacted.make(baseUrl), maxConnections: 1 })
    yield* Effect.acquireRelease(admin`CREATE SCHEMA ${admin(name)}`, () => Effect.orDie(admin`DROP SCHEMA ${admin(name)} CASCADE`))
    return schemaUrl(name)
  })

/** Runs a script's program; on failure prints the error and exits 1. */
export const runScript = (program: Effect.Effect<void, unknown, Reactivity.Reactivity>): Promise<void> =>
  Effect.runPromise(program.pipe(Effect.provide(Reactivity.layer))).catch((error: unknown) => {
    console.error(error)
    process.exit(1)
  })
