/** `fair-relay/dashboard`: the operator dashboard in the browser (pages over `RelayQueue`; redrive behind a token). */
export * as Dashboard from "./dashboard/Dashboard.js"
