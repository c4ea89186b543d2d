/**
 * `fair-relay/dashboard`: the operator dashboard in the browser (pages over `RelayQueue`; redrive behind a token).
 *
 * @module
 */
/** The operator dashboard: its server, pages and configuration. */
export * as Dashboard from "./dashboard/Dashboard.js"
