/**
 * The real-process scenarios on PostgreSQL: the claim race (SPEC §5 scenario 3) and the six crash
 * points (scenarios 13–18), with the observations and result shapes of the SQLite versions in
 * `../`. Every store is a schema named by a URL (`withSchema` in test/support/backends.ts).
 */
export * from "./claimRace.js"
export * from "./crashPoint.js"
export * from "./stores.js"
