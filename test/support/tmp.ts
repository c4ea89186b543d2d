/**
 * Where the tests put their temporary stores: FAIR_RELAY_TEST_TMPDIR, else os.tmpdir().
 * vitest.config.ts points it at /dev/shm (tmpfs) when that is writable and the variable is unset:
 * the stores are SQLite files whose every commit is an fsync, and on a disk those dominate the
 * SQLite tests' time. No test here proves durability across a power loss (a crash is a process
 * killed or exiting, whose writes the kernel keeps either way), so tmpfs proves the same things.
 * Set FAIR_RELAY_TEST_TMPDIR to a directory on disk to run them there instead.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** The directory temporary test directories are created in. */
export const testTmpDir = (): string => {
  const dir = process.env.FAIR_RELAY_TEST_TMPDIR
  return dir === undefined || dir === "" ? os.tmpdir() : dir
}

/** A fresh temporary directory under `testTmpDir()`, named `fair-relay-<label>-XXXXXX`. */
export const makeTestDir = (label: string): string => fs.mkdtempSync(path.join(testTmpDir(), `fair-relay-${label}-`))
