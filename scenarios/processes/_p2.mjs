import { Effect } from "effect"
import * as S from "@effect/sql-sqlite-node/SqliteClient"
console.log(typeof Effect, typeof S)
