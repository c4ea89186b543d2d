import { Effect } from "effect"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import { Relay } from "../../src/services/Relay.js"
console.log(typeof SqliteRelayQueue.make, typeof SqliteInbox.make, typeof Relay, typeof Effect.gen)
