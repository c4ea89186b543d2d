import * as fs from "node:fs"
import { defineConfig } from "vitest/config"
import { LongFirstSequencer } from "./test/support/sequencer.js"

// Temporary stores on tmpfs when the machine has one (see test/support/tmp.ts); set
// FAIR_RELAY_TEST_TMPDIR to choose another directory. Set here, before the workers and the child
// processes they spawn are started, so every one of them inherits it.
if (process.env.FAIR_RELAY_TEST_TMPDIR === undefined) {
  try {
    fs.accessSync("/dev/shm", fs.constants.W_OK)
    if (fs.statSync("/dev/shm").isDirectory()) process.env.FAIR_RELAY_TEST_TMPDIR = "/dev/shm"
  } catch {
    // no tmpfs here: os.tmpdir()
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Fails the run at once when it requires a service the tests would skip without
    // (test/support/required.ts), then bundles the CLI and the child processes the tests start
    // (test/support/bundles.ts).
    globalSetup: ["test/support/required.ts", "test/support/bundles.ts"],
    // Two test files at once, even on 2 CPUs (vitest's default there is one): most of the long
    // files wait on child processes, PostgreSQL or timers rather than use a CPU of their own.
    maxWorkers: 2,
    minWorkers: 1,
    // Long files first on a clean clone too (test/support/sequencer.ts).
    sequence: { sequencer: LongFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
