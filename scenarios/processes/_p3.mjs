import { Effect } from "effect"
console.log(typeof Effect)
