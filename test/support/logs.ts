/**
 * Logs kept in memory for a test: each log's message (its parts joined by a space) and its
 * annotations, in the order they were written, and the layer that makes this the default logger.
 */
import { HashMap, Logger } from "effect"
import type { Layer } from "effect"

export interface CapturedLog {
  readonly message: string
  /** The level's label: "DEBUG", "INFO", "WARN", "ERROR", … */
  readonly level: string
  readonly annotations: Readonly<Record<string, unknown>>
}

/** What a test's logs were kept in, and the layer that keeps them there. */
export interface LogCapture {
  readonly logs: ReadonlyArray<CapturedLog>
  readonly layer: Layer.Layer<never>
}

export const captureLogs = (): LogCapture => {
  const logs: Array<CapturedLog> = []
  const logger = Logger.make(({ annotations, logLevel, message }) => {
    logs.push({
      message: (Array.isArray(message) ? message : [message]).map(String).join(" "),
      level: logLevel.label,
      annotations: Object.fromEntries(HashMap.toEntries(annotations))
    })
  })
  return { logs, layer: Logger.replace(Logger.defaultLogger, logger) }
}
