/**
 * The PostgreSQL floor: what the worker daemon's single step does (`settleAndClaim`: ack the held
 * head, claim the next, one transaction under the store's lock) issued straight through one `pg`
 * client, no Effect, on a store made by the library (its schema, indexes and backlog). It answers
 * what our own code costs above the statements it sends.
 *
 * One transaction per step, exact claims (the store's advisory lock), the store's statements in
 * their simplest form for this workload (no groups, every reply `Accepted`):
 *  - BEGIN, the lock timeout, generic plans and the advisory lock with the clock read (one query);
 *  - the held event with the event after it (`UNION ALL`), checked (inflight, same generation,
 *    lease not over);
 *  - its ack and the flow's new head in one statement (`WITH … UPDATE`);
 *  - the turn walk: the first due flow by `(served, flow_id)` (one seek of the wake index decides
 *    whether to walk), then its head;
 *  - the head's claim, the flow's turn and the clock in one statement, then COMMIT.
 *
 * `rounds: 5` sends them one round trip each, the last with COMMIT (5 per step; our store did so
 * before it sent its statements in batches). `rounds: 3` sends each statement as soon as nothing
 * it needs is still awaited (`pg`'s pipeline mode): BEGIN … clock read and the held event
 * together, the ack and the walk together, the claim and COMMIT together — the fewest round trips
 * these statements allow when the client decides (3 per step), as our store's batches did until
 * `0dd37d6`. `rounds: 2` sends the walk with the held event as our store now does (the walk at the
 * time taken before the step, one flow deeper, the held flow's turn read with its event): the
 * claim is the first of the walked flows other than the held one and the held flow's next head, in
 * turn order; the ack, the claim and COMMIT go together. It makes none of the store's checks that
 * the walk could have missed a head (none can in this workload: every head is due before it runs).
 */
import pg from "pg"

interface EventRow {
  readonly next?: number
  readonly event_id: string
  readonly flow_id: string
  readonly seq: string | number
  readonly state: string
  readonly next_at: string | number
  readonly lease_until: string | number | null
  readonly generation: string | number
  readonly attempts: string | number
  readonly lifetime_attempts: string | number
}

interface Claimed {
  readonly eventId: string
  readonly flowId: string
  readonly seq: number
  readonly generation: number
}

interface Candidate extends EventRow {
  readonly served: string | number
  readonly weight: string | number
  readonly burst: string | number
}

const text = {
  begin: "BEGIN; SET LOCAL lock_timeout = 30000; SET LOCAL plan_cache_mode = force_generic_plan; " +
    "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '/relay_queue'))",
  clock: "SELECT tick, ticket FROM relay_clock WHERE id = 1",
  held: `SELECT 0 AS next, e.* FROM relay_event e WHERE e.event_id = $1
    UNION ALL SELECT 1 AS next, n.* FROM relay_event e JOIN relay_event n ON n.flow_id = e.flow_id AND n.seq = e.seq + 1
    WHERE e.event_id = $1`,
  ack: `WITH acked AS (UPDATE relay_event SET state = 'acked', lease_until = NULL, acked_at = $2 WHERE event_id = $1)
    UPDATE relay_flow SET head_seq = $3, eligible_at = $4 WHERE flow_id = $5`,
  heldWithTurn: `SELECT 0 AS next, f.served, f.weight, f.burst, e.* FROM relay_event e JOIN relay_flow f ON f.flow_id = e.flow_id
      WHERE e.event_id = $1
    UNION ALL SELECT 1 AS next, f.served, f.weight, f.burst, n.* FROM relay_event e
      JOIN relay_event n ON n.flow_id = e.flow_id AND n.seq = e.seq + 1 JOIN relay_flow f ON f.flow_id = e.flow_id
    WHERE e.event_id = $1`,
  walkTwo: `SELECT f.served, f.weight, f.burst, e.* FROM (SELECT * FROM relay_flow
      WHERE eligible_at IS NOT NULL AND group_id IS NULL AND +eligible_at <= $1 ORDER BY served, flow_id
      LIMIT CASE WHEN (SELECT MIN(eligible_at) FROM relay_flow WHERE eligible_at IS NOT NULL) <= $1 THEN 2 ELSE 0 END) AS f
    JOIN relay_event e ON e.flow_id = f.flow_id AND e.seq = f.head_seq`,
  walk: `SELECT f.served, f.weight, f.burst, e.* FROM (SELECT * FROM relay_flow
      WHERE eligible_at IS NOT NULL AND group_id IS NULL AND +eligible_at <= $1 ORDER BY served, flow_id
      LIMIT CASE WHEN (SELECT MIN(eligible_at) FROM relay_flow WHERE eligible_at IS NOT NULL) <= $1 THEN 1 ELSE 0 END) AS f
    JOIN relay_event e ON e.flow_id = f.flow_id AND e.seq = f.head_seq`,
  claim: `WITH clock AS (UPDATE relay_clock SET tick = $1, ticket = $2 WHERE id = 1),
      claimed AS (UPDATE relay_event SET state = 'inflight', lease_until = $3, generation = $4, attempts = $5,
        lifetime_attempts = $6 WHERE event_id = $7)
    UPDATE relay_flow SET served = $8, burst = $9, eligible_at = $3 WHERE flow_id = $10`,
  tick: "UPDATE relay_clock SET tick = $1 WHERE id = 1",
  step: "SELECT * FROM floor_step($1, $2, $3, $4)"
} as const

/**
 * `rounds: 1`: the same statements as one server function — the store's lock, the clock, the held
 * event checked and acked, the walk and the claim — so the step is one call, one round trip, and
 * the lock is held only while the server runs it (not across a client round trip). Made once per
 * schema by the first worker (`installStep`).
 */
const stepFunction = `CREATE OR REPLACE FUNCTION floor_step(p_event TEXT, p_generation BIGINT, p_time BIGINT, p_lease BIGINT)
RETURNS TABLE (c_event TEXT, c_flow TEXT, c_seq BIGINT, c_generation BIGINT) LANGUAGE plpgsql AS $fn$
DECLARE
  v_tick BIGINT; v_ticket BIGINT; v_now BIGINT; v_fresh BOOLEAN;
  e relay_event%ROWTYPE; n relay_event%ROWTYPE; h RECORD;
BEGIN
  SET LOCAL lock_timeout = 30000;
  PERFORM pg_advisory_xact_lock(hashtext(current_schema() || '/relay_queue'));
  SELECT c.tick, c.ticket INTO v_tick, v_ticket FROM relay_clock c WHERE c.id = 1;
  v_now := GREATEST(v_tick, p_time);
  IF p_event IS NOT NULL THEN
    SELECT * INTO e FROM relay_event x WHERE x.event_id = p_event;
    IF NOT FOUND OR e.state <> 'inflight' OR e.generation <> p_generation THEN RAISE EXCEPTION 'floor: % is stale', p_event; END IF;
    IF e.lease_until IS NULL OR v_now >= e.lease_until THEN RAISE EXCEPTION 'floor: % expired', p_event; END IF;
    SELECT * INTO n FROM relay_event x WHERE x.flow_id = e.flow_id AND x.seq = e.seq + 1;
    UPDATE relay_event x SET state = 'acked', lease_until = NULL, acked_at = v_now WHERE x.event_id = p_event;
    UPDATE relay_flow f SET head_seq = n.seq,
      eligible_at = CASE n.state WHEN 'ready' THEN n.next_at WHEN 'inflight' THEN n.lease_until END
      WHERE f.flow_id = e.flow_id;
  END IF;
  SELECT f.served, f.weight, f.burst, x.event_id, x.flow_id, x.seq, x.generation, x.attempts, x.lifetime_attempts INTO h
    FROM (SELECT * FROM relay_flow WHERE eligible_at IS NOT NULL AND group_id IS NULL AND +eligible_at <= v_now ORDER BY served, flow_id
      LIMIT CASE WHEN (SELECT MIN(eligible_at) FROM relay_flow WHERE eligible_at IS NOT NULL) <= v_now THEN 1 ELSE 0 END) AS f
    JOIN relay_event x ON x.flow_id = f.flow_id AND x.seq = f.head_seq;
  IF NOT FOUND THEN
    UPDATE relay_clock SET tick = v_now WHERE id = 1;
    RETURN;
  END IF;
  v_ticket := v_ticket + 1;
  v_fresh := h.burst + 1 >= h.weight;
  UPDATE relay_clock SET tick = v_now, ticket = v_ticket WHERE id = 1;
  UPDATE relay_event x SET state = 'inflight', lease_until = v_now + p_lease, generation = h.generation + 1,
    attempts = h.attempts + 1, lifetime_attempts = h.lifetime_attempts + 1 WHERE x.event_id = h.event_id;
  UPDATE relay_flow f SET served = CASE WHEN v_fresh THEN v_ticket ELSE h.served END,
    burst = CASE WHEN v_fresh THEN 0 ELSE h.burst + 1 END, eligible_at = v_now + p_lease WHERE f.flow_id = h.flow_id;
  RETURN QUERY SELECT h.event_id::TEXT, h.flow_id::TEXT, h.seq, h.generation + 1;
END
$fn$`

/** Makes `floor_step` in the client's schema, once across the worker processes that share it. */
export const installStep = async (client: pg.Client): Promise<void> => {
  await client.query("SELECT pg_advisory_lock(hashtext(current_schema() || '/floor_step'))")
  try {
    const { rows } = await client.query("SELECT 1 FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace WHERE p.proname = 'floor_step' AND s.nspname = current_schema()")
    if (rows.length === 0) await client.query(stepFunction)
  } finally {
    await client.query("SELECT pg_advisory_unlock(hashtext(current_schema() || '/floor_step'))")
  }
}

const named = (name: keyof typeof text, values: ReadonlyArray<unknown>) => ({ name: `floor_${name}`, text: text[name], values: [...values] })

const eligibleAt = (row: EventRow | undefined): number | null =>
  row === undefined ? null : row.state === "ready" ? Number(row.next_at) : row.state === "inflight" ? Number(row.lease_until) : null

/** A floor worker on `client` (made with `pipeline: true`): `step` settles what it holds and claims the next head. */
export const floorWorker = (client: pg.Client, options: { readonly rounds: 1 | 2 | 3 | 5; readonly leaseMs: number }) => {
  let held: Claimed | undefined
  const pipelined = options.rounds !== 5

  // Queries sent ahead fail with the one before them: each is awaited or its failure ignored.
  const send = <R extends pg.QueryResultRow>(query: string | pg.QueryConfig): Promise<pg.QueryResult<R>> => {
    const sent = client.query<R>(query)
    sent.catch(() => undefined)
    return sent
  }

  /** The claim of `head` at `now` (its event, its flow's turn, the clock): the statement and what it claims. */
  const claimOf = (head: Candidate | undefined, now: number, ticketBefore: number): readonly [pg.QueryConfig, Claimed | undefined] => {
    if (head === undefined) return [named("tick", [now]), undefined]
    const ticket = ticketBefore + 1
    const fresh = Number(head.burst) + 1 >= Number(head.weight)
    const generation = Number(head.generation) + 1
    return [
      named("claim", [
        now,
        ticket,
        now + options.leaseMs,
        generation,
        Number(head.attempts) + 1,
        Number(head.lifetime_attempts) + 1,
        head.event_id,
        fresh ? ticket : Number(head.served),
        fresh ? 0 : Number(head.burst) + 1,
        head.flow_id
      ]),
      { eventId: head.event_id, flowId: head.flow_id, seq: Number(head.seq), generation }
    ]
  }

  /** The last statement and COMMIT, one round trip; what the step claimed. */
  const commit = async (last: pg.QueryConfig, claimed: Claimed | undefined) => {
    const written = send(last)
    const committed = send("COMMIT")
    await written
    const { command } = await committed
    if (command !== "COMMIT") throw new Error(`floor: COMMIT answered ${command}`)
    held = claimed
    return claimed
  }

  /** BEGIN … clock read answered: the clock, and the step's time (never before the stored tick). */
  const opened = async (begun: Promise<pg.QueryResult<{ tick: string; ticket: string }>>) => {
    const results = (await begun) as unknown as ReadonlyArray<pg.QueryResult<{ tick: string; ticket: string }>>
    const clock = results[results.length - 1]!.rows[0]!
    return { ticket: Number(clock.ticket), now: Math.max(Number(clock.tick), Date.now()) }
  }

  /**
   * The held event's rows (itself and the event after it) checked — inflight, the token's
   * generation, its lease not over — and its ack with the flow's new head; the event after it.
   */
  const acking = <R extends EventRow>(token: Claimed, rows: ReadonlyArray<R>, now: number) => {
    const event = rows.find((row) => Number(row.next) === 0)
    const next = rows.find((row) => Number(row.next) === 1)
    if (event === undefined || event.state !== "inflight" || Number(event.generation) !== token.generation) {
      throw new Error(`floor: ${token.eventId} is stale`)
    }
    if (event.lease_until === null || now >= Number(event.lease_until)) throw new Error(`floor: ${token.eventId} expired`)
    const ack = named("ack", [token.eventId, now, next === undefined ? null : Number(next.seq), eligibleAt(next), token.flowId])
    return { ack, next }
  }

  /** `work`'s claim; on any failure the transaction is rolled back and nothing is held. */
  const inTransaction = async (work: () => Promise<Claimed | undefined>): Promise<Claimed | undefined> => {
    try {
      return await work()
    } catch (error) {
      held = undefined
      await client.query("ROLLBACK").catch(() => undefined)
      throw error
    }
  }

  /** `rounds: 2`: the walk with the held event; the ack, the claim and COMMIT together. */
  const stepAhead = async (): Promise<Claimed | undefined> => {
    const token = held
    const walkedAt = Date.now()
    const begun = send<{ tick: string; ticket: string }>(`${text.begin}; ${text.clock}`)
    const heldRead = token === undefined ? undefined : send<Candidate & { readonly next: number }>(named("heldWithTurn", [token.eventId]))
    const walked = send<Candidate>(named("walkTwo", [walkedAt]))
    return inTransaction(async () => {
      const { now, ticket } = await opened(begun)
      let candidates = (await walked).rows
      if (token !== undefined) {
        const { ack, next } = acking(token, (await heldRead!).rows, now)
        send(ack)
        candidates = candidates.filter((c) => c.flow_id !== token.flowId)
        if (next !== undefined && (eligibleAt(next) ?? Infinity) <= now) candidates.push(next)
      }
      const [head] = candidates.sort((a, b) => Number(a.served) - Number(b.served) || (a.flow_id < b.flow_id ? -1 : a.flow_id > b.flow_id ? 1 : 0))
      const [last, claimed] = claimOf(head, now, ticket)
      return commit(last, claimed)
    })
  }

  /** `rounds: 1`: the whole step in one call of `floor_step` (autocommit: one transaction). */
  const stepOnServer = async (): Promise<Claimed | undefined> => {
    const token = held
    held = undefined
    const { rows } = await client.query<{ c_event: string; c_flow: string; c_seq: string; c_generation: string }>(
      named("step", [token?.eventId ?? null, token?.generation ?? null, Date.now(), options.leaseMs])
    )
    const row = rows[0]
    held = row === undefined ? undefined : { eventId: row.c_event, flowId: row.c_flow, seq: Number(row.c_seq), generation: Number(row.c_generation) }
    return held
  }

  const step = async (): Promise<Claimed | undefined> => {
    if (options.rounds === 1) return stepOnServer()
    if (options.rounds === 2) return stepAhead()
    const token = held
    // Round trip 1: BEGIN … lock and the clock read (one query); with 3 rounds, the held event too.
    const begun = send<{ tick: string; ticket: string }>(`${text.begin}; ${text.clock}`)
    const heldRead = token !== undefined && pipelined ? send<EventRow>(named("held", [token.eventId])) : undefined
    return inTransaction(async () => {
      const { now, ticket } = await opened(begun)
      let ack: Promise<unknown> = Promise.resolve()
      if (token !== undefined) {
        ack = send(acking(token, (await (heldRead ?? send<EventRow>(named("held", [token.eventId])))).rows, now).ack)
        // With 5 rounds the ack is a round trip of its own.
        if (!pipelined) await ack
      }
      // With 3 rounds the walk goes with the ack.
      const walked = send<Candidate>(named("walk", [now]))
      await ack
      const [head] = (await walked).rows
      const [last, claimed] = claimOf(head, now, ticket)
      // The last statement and COMMIT: one round trip in both forms (ours sends them together too).
      return commit(last, claimed)
    })
  }
  return { step }
}
