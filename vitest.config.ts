import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Builds the CLI bundle the CLI tests run (test/support/cliBundle.ts).
    globalSetup: ["test/support/cliBundle.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
