/**
 * The model-based test (see `RelayQueue.model.test.ts`) on the in-memory queue
 * (`MemoryRelayQueue`): a new, empty store per sequence, FAIR_RELAY_MODEL_RUNS sequences (default
 * 1,000), FAIR_RELAY_MODEL_BACKEND=memory to run it alone.
 */
import { memory } from "./backends.js"
import { modelSuite, runs } from "./suite.js"

modelSuite(memory, runs)
