/**
 * The order test files start in. Vitest starts the files that took longest last time first, so the
 * two workers finish together; but a clean clone (CI) has no such record, and vitest's fallback —
 * the largest file first — starts the PostgreSQL model runs, small files that each run a minute,
 * last, and the suite waits on them alone. Without a record, these known-long groups go first.
 */
import * as path from "node:path"
import { BaseSequencer } from "vitest/node"
import type { TestSpecification } from "vitest/node"

/** Paths (from the project root) of the long files, by prefix, longest first. */
export const longFirst: ReadonlyArray<string> = [
  "test/model/RelayQueue.model.pg",
  "test/services/Fairness",
  "test/cli/operator",
  "test/reliability/chaos",
  "test/services/GroupFairness",
  "test/services/RelayQueue.guards",
  "test/readme/",
  "test/model/",
  "test/cli/groups"
]

/** Where `file` stands in `longFirst` (files it does not name after all of them). */
export const rank = (file: string): number => {
  const i = longFirst.findIndex((prefix) => file.startsWith(prefix))
  return i < 0 ? longFirst.length : i
}

export class LongFirstSequencer extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    const root = this.ctx.config.root
    const known = sorted.some((file) => this.ctx.cache.getFileTestResults(`${file.project.name}:${path.relative(root, file.moduleId)}`))
    if (known) return sorted
    const ranked = (file: TestSpecification) => rank(path.relative(root, file.moduleId).split(path.sep).join("/"))
    // Array.prototype.sort is stable: within a rank, vitest's own order stays.
    return [...sorted].sort((a, b) => ranked(a) - ranked(b))
  }
}
