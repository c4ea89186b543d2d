/**
 * The policy presets by name, for `Policy.seed` / `Policy.defaults` at the package root.
 */
import { defaultPolicy, seedPolicy } from "./Policy.js"

/** The article's policy on logical ticks (lease 5, budget 3, base 2, cap 8, seed admission, strict clock). */
export const seed = seedPolicy

/** The library's production defaults on a millisecond clock. */
export const defaults = defaultPolicy
