/**
 * The PostgreSQL store's hot operations as server functions: each is one call, so one round trip,
 * and the store's lock (exact claims) or the rows' locks (parallel claims) are held only while the
 * server runs it. They decide as `Operations` and `Protocol` do — the contract suite and the model
 * test run them against the same expectations as SQLite — with what the client gives them: the
 * time (null: the server's clock), the policy, and the random draws of full jitter.
 *
 * - `relay_step`: settles replies, then claims up to a limit (either may be empty): `settle`,
 *   `claimUpTo` and `settleAndClaim` alike. A claim of `limit` heads is `limit` claims of one in a
 *   row (`Operations.rotate`'s order): each takes the least `(served, id)` place — a flow of no
 *   group, or a group and then its least flow — and charges its turn.
 * - `relay_enqueue`: enqueues commands in order (`Operations.enqueue`); a conflict raises
 *   `FR001` (an id stored otherwise) or `FR002` (a flow's group), writing nothing.
 *
 * Both answer one JSON document; `{"regressed": …}` when the time is behind the stored tick in
 * strict mode (nothing written).
 */

import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as QueueSchema from "./QueueSchema.js"
import type { Migrations } from "./Store.js"

/** Opens an operation: its lock timeout, the store's lock (exact), the clock read and checked. */
const begin = `
  v_setting := set_config('lock_timeout', p_lock_timeout::text, true);
  IF NOT p_parallel THEN PERFORM pg_advisory_xact_lock(hashtext(current_schema() || '/relay_queue')); END IF;
  SELECT tick, ticket INTO v_tick, v_ticket FROM relay_clock WHERE id = 1;
  v_now := COALESCE(p_now, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint);
  IF v_now < v_tick AND p_strict THEN
    RETURN jsonb_build_object('regressed', jsonb_build_object('now', v_now, 'tick', v_tick))::text;
  END IF;`

/** Stores the clock of an operation that changed something: the tick moved on, and (exact) the tickets taken. */
const storeClock = `
  IF p_parallel THEN
    IF v_now > v_tick THEN
      UPDATE relay_clock SET tick = v_now WHERE id = (SELECT id FROM relay_clock WHERE id = 1 AND tick < v_now FOR UPDATE SKIP LOCKED);
    END IF;
  ELSE
    UPDATE relay_clock SET tick = GREATEST(v_tick, v_now), ticket = v_ticket WHERE id = 1;
  END IF;`

/** Where a parallel enqueue's turns are decided: above any ticket the sequence will draw, below 2^53. */
const Decided = 2 ** 52

/** The next ticket: the store's counter (exact), or its sequence (parallel). */
const nextTicket = "v_ticket := CASE WHEN p_parallel THEN nextval('relay_ticket') ELSE v_ticket + 1 END;"

/**
 * `select` (a `SELECT … INTO …` up to the LIMIT of the rows it takes, then `after`) as each mode
 * runs it: in parallel mode it locks the rows it takes and skips those another transaction holds.
 */
const taking = (select: string, after = "") => `IF p_parallel THEN
      ${select} FOR UPDATE SKIP LOCKED${after};
    ELSE
      ${select}${after};
    END IF;`

/** The `eligible_at` of the group `id`: the least of its flows' that have a head and are not paused. */
const groupEligibleAt = (id: string) =>
  `(SELECT MIN(x.eligible_at) FROM relay_flow x WHERE x.group_id = ${id} AND x.head_seq IS NOT NULL AND x.eligible_at IS NOT NULL AND x.paused = 0)`

/** The functions, made (or replaced) by a migration. */
export const functions = `
CREATE OR REPLACE FUNCTION relay_refresh_groups(p_groups TEXT[]) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
  IF cardinality(p_groups) = 0 THEN RETURN; END IF;
  -- Locked first: the update's snapshot then sees every flow change of a writer that refreshed them before.
  PERFORM 1 FROM relay_group WHERE group_id = ANY(p_groups) ORDER BY group_id FOR UPDATE;
  UPDATE relay_group g SET eligible_at = ${groupEligibleAt("g.group_id")} WHERE g.group_id = ANY(p_groups);
END $fn$;

CREATE OR REPLACE FUNCTION relay_step(
  p_parallel BOOLEAN, p_lock_timeout BIGINT, p_now BIGINT, p_strict BOOLEAN,
  p_lease BIGINT, p_budget BIGINT, p_base FLOAT8, p_cap FLOAT8, p_jitter BOOLEAN,
  p_ids TEXT[], p_generations BIGINT[], p_verdicts TEXT[], p_reasons TEXT[], p_after BIGINT[], p_draws FLOAT8[], p_limit INTEGER
) RETURNS TEXT LANGUAGE plpgsql AS $fn$
DECLARE
  v_tick BIGINT; v_ticket BIGINT; v_now BIGINT; v_changed BOOLEAN := false; v_setting TEXT;
  i INTEGER; e relay_event%ROWTYPE; f relay_flow%ROWTYPE; g relay_group%ROWTYPE;
  v_group TEXT; v_groups TEXT[] := '{}'; v_skip TEXT[] := '{}'; v_delay FLOAT8; v_next BIGINT;
  v_outcomes JSONB := '[]'; v_quarantined JSONB := '[]'; v_claims JSONB := '[]'; v_wake BIGINT; v_count INTEGER := 0;
  v_fresh BOOLEAN; v_grouped BOOLEAN; v_limit INTEGER := p_limit; v_acked TEXT[]; v_pick TEXT[]; v_tickets BIGINT[]; v_batch JSONB;
BEGIN
  ${begin}
  IF cardinality(p_ids) > 0 AND p_parallel THEN
    -- The flows and events settled, locked in one order: a claim of one of them commits first.
    PERFORM 1 FROM relay_event x JOIN relay_flow y ON y.flow_id = x.flow_id
      WHERE x.event_id = ANY(p_ids) ORDER BY x.flow_id, x.seq FOR UPDATE OF y, x;
  END IF;
  IF cardinality(p_ids) > 1 AND 'ack' = ALL(p_verdicts) AND cardinality(p_ids) = (SELECT count(DISTINCT x) FROM unnest(p_ids) AS x) THEN
    -- Acks of distinct events (a batch): one statement for the current claims among them; each
    -- acked event is its flow's only head in flight, so no two of them share a flow.
    WITH acked AS (
      UPDATE relay_event x SET state = 'acked', lease_until = NULL, acked_at = v_now FROM unnest(p_ids, p_generations) AS t(id, generation)
        WHERE x.event_id = t.id AND x.generation = t.generation AND x.state = 'inflight' AND x.lease_until > v_now
        RETURNING x.event_id, x.flow_id, x.seq),
    heads AS (
      UPDATE relay_flow y SET (head_seq, eligible_at) = (SELECT n.seq, CASE n.state WHEN 'ready' THEN n.next_at WHEN 'inflight' THEN n.lease_until END
          FROM relay_event n WHERE n.flow_id = a.flow_id AND n.seq = a.seq + 1)
        FROM acked a WHERE y.flow_id = a.flow_id RETURNING y.group_id)
    SELECT (SELECT array_agg(event_id) FROM acked), (SELECT coalesce(array_agg(DISTINCT group_id), '{}') FROM heads WHERE group_id IS NOT NULL)
      INTO v_acked, v_groups;
  END IF;
  FOR i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP
    IF p_ids[i] = ANY(v_acked) THEN
      v_outcomes := v_outcomes || jsonb_build_object('_tag', 'Acked');
      v_changed := true;
      CONTINUE;
    END IF;
    IF p_verdicts[i] = 'ack' THEN
      -- An ack of the current claim, in its lease, in one statement; anything else is read first.
      UPDATE relay_event SET state = 'acked', lease_until = NULL, acked_at = v_now
        WHERE event_id = p_ids[i] AND generation = p_generations[i] AND state = 'inflight' AND lease_until > v_now RETURNING * INTO e;
      IF FOUND THEN
        UPDATE relay_flow SET (head_seq, eligible_at) = (SELECT n.seq, CASE n.state WHEN 'ready' THEN n.next_at WHEN 'inflight' THEN n.lease_until END
            FROM relay_event n WHERE n.flow_id = e.flow_id AND n.seq = e.seq + 1)
          WHERE flow_id = e.flow_id RETURNING group_id INTO v_group;
        v_outcomes := v_outcomes || jsonb_build_object('_tag', 'Acked');
        v_changed := true;
        IF v_group IS NOT NULL AND NOT v_group = ANY(v_groups) THEN v_groups := v_groups || v_group; END IF;
        CONTINUE;
      END IF;
    END IF;
    SELECT * INTO e FROM relay_event WHERE event_id = p_ids[i];
    IF NOT FOUND OR e.generation <> p_generations[i] OR e.state <> 'inflight' THEN
      v_outcomes := v_outcomes || jsonb_build_object('_tag', 'Stale');
      CONTINUE;
    END IF;
    IF e.lease_until IS NULL OR v_now >= e.lease_until THEN
      v_outcomes := v_outcomes || jsonb_build_object('_tag', 'Expired');
      CONTINUE;
    END IF;
    v_changed := true;
    IF p_verdicts[i] = 'quarantine' OR e.attempts >= p_budget THEN
      UPDATE relay_event SET state = 'quarantined', reason = p_reasons[i], next_at = v_now, lease_until = NULL WHERE event_id = e.event_id;
      UPDATE relay_flow SET eligible_at = NULL WHERE flow_id = e.flow_id RETURNING group_id INTO v_group;
      v_outcomes := v_outcomes || jsonb_build_object('_tag', 'Quarantined', 'reason', p_reasons[i]);
      v_quarantined := v_quarantined || jsonb_build_object('_tag', 'Quarantined', 'eventId', e.event_id, 'flowId', e.flow_id, 'group', v_group,
        'reason', p_reasons[i], 'generation', e.generation);
    ELSE
      -- Protocol.retryDelayAtLeast: the schedule (full jitter: a draw of it), at least what the receiver asked, capped.
      v_delay := LEAST(p_cap, p_base * power(2::float8, LEAST(52, GREATEST(0, e.attempts - 1))));
      IF p_jitter THEN v_delay := floor(v_delay * LEAST(GREATEST(p_draws[i], 0), 1)); END IF;
      IF p_after[i] IS NOT NULL THEN v_delay := LEAST(p_cap, GREATEST(v_delay, p_after[i])); END IF;
      v_next := v_now + v_delay::bigint;
      UPDATE relay_event SET state = 'ready', next_at = v_next, lease_until = NULL, reason = p_reasons[i] WHERE event_id = e.event_id;
      UPDATE relay_flow SET eligible_at = v_next WHERE flow_id = e.flow_id RETURNING group_id INTO v_group;
      v_outcomes := v_outcomes || jsonb_build_object('_tag', 'RetryScheduled', 'nextAt', v_next);
    END IF;
    IF v_group IS NOT NULL AND NOT v_group = ANY(v_groups) THEN v_groups := v_groups || v_group; END IF;
  END LOOP;
  IF cardinality(v_groups) > 0 THEN PERFORM relay_refresh_groups(v_groups); END IF;
  IF p_limit > 1 AND NOT EXISTS (SELECT 1 FROM relay_group WHERE eligible_at IS NOT NULL AND eligible_at <= v_now AND paused = 0) THEN
    -- A batch with no group to take turns with: the first flows in turn order, one ticket each in
    -- that order (what claims of one in a row take), in one statement.
    ${taking(`SELECT array_agg(flow_id ORDER BY served, flow_id) INTO v_pick FROM (SELECT flow_id, served FROM relay_flow
        WHERE eligible_at IS NOT NULL AND group_id IS NULL AND +eligible_at <= v_now AND paused = 0
        ORDER BY served, flow_id LIMIT p_limit`, ") AS due")}
    IF p_parallel THEN
      SELECT array_agg(n ORDER BY n) INTO v_tickets FROM (SELECT nextval('relay_ticket') AS n FROM generate_series(1, coalesce(cardinality(v_pick), 0))) AS drawn;
    ELSE
      v_tickets := ARRAY(SELECT v_ticket + k FROM generate_series(1, coalesce(cardinality(v_pick), 0)) AS k);
      v_ticket := v_ticket + coalesce(cardinality(v_pick), 0);
    END IF;
    IF cardinality(v_pick) > 0 THEN
      WITH picked AS (SELECT * FROM unnest(v_pick, v_tickets) WITH ORDINALITY AS t(flow_id, ticket, k)),
      claimed AS (
        UPDATE relay_event x SET state = 'inflight', generation = x.generation + 1, attempts = x.attempts + 1,
            lifetime_attempts = x.lifetime_attempts + 1, lease_until = v_now + p_lease
          FROM picked p JOIN relay_flow y ON y.flow_id = p.flow_id
          WHERE x.flow_id = y.flow_id AND x.seq = y.head_seq
            AND ((x.state = 'ready' AND x.next_at <= v_now) OR (x.state = 'inflight' AND x.lease_until <= v_now))
          RETURNING x.*, p.k, CASE WHEN y.resume_seq = x.seq THEN y.resume_after END AS previous),
      turned AS (
        UPDATE relay_flow y SET served = CASE WHEN y.burst + 1 >= y.weight THEN p.ticket ELSE y.served END,
            burst = CASE WHEN y.burst + 1 >= y.weight THEN 0 ELSE y.burst + 1 END, eligible_at = v_now + p_lease
          FROM picked p WHERE y.flow_id = p.flow_id)
      SELECT count(*), jsonb_agg(jsonb_build_object('event', to_jsonb(c), 'group', NULL, 'previousSeq', c.previous) ORDER BY c.k)
        INTO v_count, v_batch FROM claimed c;
      IF v_count <> cardinality(v_pick) THEN RAISE EXCEPTION 'a flow caches a head that is not eligible'; END IF;
      v_claims := v_batch;
    END IF;
    -- Every head due was taken, up to the limit (or is another transaction's).
    v_limit := v_count;
  END IF;
  -- Claims, one at a time; none walks the flows that wait when no head is eligible.
  LOOP
    EXIT WHEN v_count >= v_limit;
    EXIT WHEN NOT coalesce((SELECT MIN(eligible_at) FROM relay_flow WHERE eligible_at IS NOT NULL) <= v_now, false);
    ${taking(`SELECT * INTO f FROM relay_flow WHERE eligible_at IS NOT NULL AND group_id IS NULL AND +eligible_at <= v_now AND paused = 0
        ORDER BY served, flow_id LIMIT 1`)}
    ${taking(`SELECT * INTO g FROM relay_group WHERE eligible_at IS NOT NULL AND +eligible_at <= v_now AND paused = 0 AND group_id <> ALL(v_skip)
        ORDER BY served, group_id LIMIT 1`)}
    -- The least (served, id) place; a flow of no group before a group of the same id.
    v_grouped := g.group_id IS NOT NULL AND (f.flow_id IS NULL OR g.served < f.served OR (g.served = f.served AND g.group_id < f.flow_id));
    IF v_grouped THEN
      ${taking(`SELECT * INTO f FROM relay_flow WHERE group_id = g.group_id AND eligible_at IS NOT NULL AND +eligible_at <= v_now AND paused = 0
          ORDER BY served, flow_id LIMIT 1`)}
      IF NOT FOUND THEN
        v_skip := v_skip || g.group_id;
        CONTINUE;
      END IF;
    ELSIF f.flow_id IS NULL THEN
      EXIT;
    END IF;
    UPDATE relay_event SET state = 'inflight', generation = generation + 1, attempts = attempts + 1,
        lifetime_attempts = lifetime_attempts + 1, lease_until = v_now + p_lease
      WHERE flow_id = f.flow_id AND seq = f.head_seq AND ((state = 'ready' AND next_at <= v_now) OR (state = 'inflight' AND lease_until <= v_now))
      RETURNING * INTO e;
    IF NOT FOUND THEN RAISE EXCEPTION 'a flow caches a head that is not eligible: %', f.flow_id; END IF;
    ${nextTicket}
    v_fresh := f.burst + 1 >= f.weight;
    UPDATE relay_flow SET served = CASE WHEN v_fresh THEN v_ticket ELSE served END, burst = CASE WHEN v_fresh THEN 0 ELSE burst + 1 END,
        eligible_at = e.lease_until
      WHERE flow_id = f.flow_id;
    IF v_grouped THEN
      v_fresh := g.burst + 1 >= g.weight;
      UPDATE relay_group SET served = CASE WHEN v_fresh THEN v_ticket ELSE served END, burst = CASE WHEN v_fresh THEN 0 ELSE burst + 1 END,
          eligible_at = ${groupEligibleAt("g.group_id")}
        WHERE group_id = g.group_id;
    END IF;
    v_claims := v_claims || jsonb_build_object('event', to_jsonb(e), 'group', g.group_id,
      'previousSeq', CASE WHEN f.resume_seq = e.seq THEN f.resume_after END);
    v_count := v_count + 1;
  END LOOP;
  IF v_count = 0 AND p_limit > 0 THEN
    IF EXISTS (SELECT 1 FROM relay_flow WHERE paused <> 0) OR EXISTS (SELECT 1 FROM relay_group WHERE paused <> 0) THEN
      SELECT MIN(eligible_at) INTO v_wake FROM relay_flow WHERE eligible_at IS NOT NULL AND paused = 0
        AND (group_id IS NULL OR group_id NOT IN (SELECT group_id FROM relay_group WHERE paused <> 0));
    ELSE
      SELECT MIN(eligible_at) INTO v_wake FROM relay_flow WHERE eligible_at IS NOT NULL;
    END IF;
  END IF;
  IF v_changed OR v_count > 0 THEN
    ${storeClock}
  END IF;
  RETURN jsonb_build_object('now', v_now, 'clamped', v_now < v_tick, 'outcomes', v_outcomes, 'quarantined', v_quarantined,
    'claims', v_claims, 'wakeAt', v_wake)::text;
END $fn$;

CREATE OR REPLACE FUNCTION relay_enqueue(
  p_parallel BOOLEAN, p_lock_timeout BIGINT, p_now BIGINT, p_strict BOOLEAN, p_seed BOOLEAN, p_commands JSONB
) RETURNS TEXT LANGUAGE plpgsql AS $fn$
DECLARE
  v_tick BIGINT; v_ticket BIGINT; v_now BIGINT; v_changed BOOLEAN := false; v_setting TEXT;
  c RECORD; x RECORD; f relay_flow%ROWTYPE; g relay_group%ROWTYPE; v_active BOOLEAN;
  v_exists BOOLEAN; v_joins TEXT; v_seq BIGINT; v_served BIGINT; v_burst BIGINT; v_weight BIGINT; v_head BIGINT; v_eligible BIGINT;
  v_results JSONB := '[]'; v_groups TEXT[] := '{}'; v_drawn BIGINT[];
  v_flows TEXT[] := ARRAY(SELECT DISTINCT i->>'f' FROM jsonb_array_elements(p_commands) AS i);
BEGIN
  ${begin}
  IF p_parallel THEN
    -- Turns decided above every ticket the sequence will draw, drawn once nothing can fail (below).
    v_ticket := ${Decided};
    -- Each flow's row locked, in one order; a new flow's placeholder (served -1: never a candidate) is what two enqueues queue on.
    INSERT INTO relay_flow (flow_id, seq, served, head_seq, eligible_at, weight, burst)
      SELECT id COLLATE "C", 0, -1, NULL::bigint, NULL::bigint, 1, 0 FROM unnest(v_flows) AS id
      ORDER BY 1 ON CONFLICT (flow_id) DO NOTHING;
    PERFORM 1 FROM relay_flow WHERE flow_id = ANY(v_flows) ORDER BY flow_id FOR UPDATE;
    PERFORM 1 FROM relay_group WHERE group_id IN (SELECT i->>'g' FROM jsonb_array_elements(p_commands) AS i
        UNION SELECT group_id FROM relay_flow WHERE flow_id = ANY(v_flows))
      ORDER BY group_id FOR UPDATE;
  END IF;
  FOR c IN SELECT * FROM ROWS FROM (jsonb_to_recordset(p_commands) AS (e TEXT, f TEXT, b TEXT, w BIGINT, g TEXT)) WITH ORDINALITY AS i(e, f, b, w, g, k)
      ORDER BY k LOOP
    SELECT event_id, flow_id, seq, body = c.b AS same INTO x FROM relay_event WHERE event_id = c.e;
    IF NOT FOUND THEN
      SELECT event_id, flow_id, seq, body_hash <> '' AND body_hash = encode(sha256(convert_to(c.b, 'UTF8')), 'hex') AS same
        INTO x FROM relay_pruned WHERE event_id = c.e;
    END IF;
    IF x.event_id IS NOT NULL THEN
      IF x.flow_id <> c.f OR NOT x.same THEN
        RAISE EXCEPTION USING ERRCODE = 'FR001', MESSAGE = jsonb_build_object('eventId', c.e, 'storedFlowId', x.flow_id, 'storedSeq', x.seq)::text;
      END IF;
      v_results := v_results || jsonb_build_object('_tag', 'Existing', 'seq', x.seq);
      x := NULL;
      CONTINUE;
    END IF;
    SELECT * INTO f FROM relay_flow WHERE flow_id = c.f;
    v_exists := FOUND AND f.served >= 0;
    IF c.g IS NOT NULL AND v_exists AND f.seq > 0 AND f.group_id IS DISTINCT FROM c.g THEN
      RAISE EXCEPTION USING ERRCODE = 'FR002', MESSAGE = jsonb_build_object('flowId', c.f, 'storedGroup', f.group_id, 'requestedGroup', c.g)::text;
    END IF;
    v_joins := CASE WHEN NOT v_exists OR f.seq = 0 THEN COALESCE(c.g, CASE WHEN v_exists THEN f.group_id END) ELSE f.group_id END;
    IF v_joins IS NOT NULL AND (NOT v_exists OR f.head_seq IS NULL) THEN
      -- A group enters the rotation as a flow does, when none of its flows has a head.
      SELECT * INTO g FROM relay_group WHERE group_id = v_joins;
      v_active := FOUND AND EXISTS (SELECT 1 FROM relay_flow y WHERE y.group_id = v_joins AND y.head_seq IS NOT NULL);
      IF NOT v_active THEN
        v_served := COALESCE(g.served, 0);
        IF NOT p_seed THEN v_ticket := v_ticket + 1; v_served := v_ticket; END IF;
        IF g.group_id IS NULL THEN
          INSERT INTO relay_group (group_id, served, weight, burst) VALUES (v_joins, v_served, 1, 0);
        ELSE
          UPDATE relay_group SET served = v_served, burst = CASE WHEN v_served = g.served THEN burst ELSE 0 END WHERE group_id = v_joins;
        END IF;
      END IF;
      g := NULL;
    END IF;
    IF NOT v_exists THEN
      v_seq := 1; v_served := 0; v_burst := 0; v_weight := COALESCE(c.w, 1);
      IF NOT p_seed THEN v_ticket := v_ticket + 1; v_served := v_ticket; END IF;
      INSERT INTO relay_flow (flow_id, seq, served, head_seq, eligible_at, weight, burst, group_id)
        VALUES (c.f, 1, v_served, 1, v_now, v_weight, 0, c.g)
        ON CONFLICT (flow_id) DO UPDATE SET seq = excluded.seq, served = excluded.served, head_seq = excluded.head_seq,
          eligible_at = excluded.eligible_at, weight = excluded.weight, burst = excluded.burst, group_id = excluded.group_id;
    ELSE
      v_seq := f.seq + 1; v_served := f.served; v_burst := f.burst; v_head := f.head_seq; v_eligible := f.eligible_at;
      IF f.head_seq IS NULL THEN
        IF NOT p_seed THEN v_ticket := v_ticket + 1; v_served := v_ticket; END IF;
        v_head := v_seq; v_eligible := v_now;
        IF v_served <> f.served THEN v_burst := 0; END IF;
      END IF;
      v_weight := f.weight;
      IF c.w IS NOT NULL AND c.w <> f.weight THEN v_weight := c.w; v_burst := 0; END IF;
      UPDATE relay_flow SET seq = v_seq, served = v_served, head_seq = v_head, eligible_at = v_eligible, weight = v_weight,
          burst = v_burst, group_id = COALESCE(f.group_id, c.g)
        WHERE flow_id = c.f;
    END IF;
    INSERT INTO relay_event (event_id, flow_id, seq, body, state, next_at, lease_until, generation, attempts, lifetime_attempts, reason)
      VALUES (c.e, c.f, v_seq, c.b, 'ready', v_now, NULL, 0, 0, 0, NULL);
    v_changed := true;
    v_joins := COALESCE(CASE WHEN v_exists THEN f.group_id END, c.g);
    IF v_joins IS NOT NULL AND NOT v_joins = ANY(v_groups) THEN v_groups := v_groups || v_joins; END IF;
    v_results := v_results || jsonb_build_object('_tag', 'Enqueued', 'seq', v_seq);
  END LOOP;
  IF p_parallel AND v_ticket > ${Decided} THEN
    -- The k-th turn decided takes the k-th ticket drawn: tickets a failed enqueue never drew are not lost.
    SELECT array_agg(n ORDER BY n) INTO v_drawn FROM (SELECT nextval('relay_ticket') AS n FROM generate_series(1, v_ticket - ${Decided})) AS drawn;
    UPDATE relay_flow SET served = v_drawn[(served - ${Decided})::int]
      WHERE served > ${Decided} AND flow_id = ANY(v_flows);
    UPDATE relay_group SET served = v_drawn[(served - ${Decided})::int] WHERE served > ${Decided} AND group_id = ANY(v_groups);
  END IF;
  PERFORM relay_refresh_groups(v_groups);
  IF v_changed THEN
    ${storeClock}
  END IF;
  RETURN jsonb_build_object('clamped', v_now < v_tick, 'results', v_results)::text;
END $fn$;
`

/** The PostgreSQL queue store's migrations: the shared schema's, then the functions. */
export const migrations: Migrations = {
  ...QueueSchema.migrations,
  "12_server_operations": Effect.flatMap(SqlClient, (sql) => sql.unsafe(functions))
}
