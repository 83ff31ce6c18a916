-- append_outputs: the outputs of many runs in one call (one commit), for a worker that
-- sends every stream's pending outputs together.
--
-- Guarantees:
-- * Element i is one output: of run p_run_ids[i], under fence p_fences[i], write number
--   p_seqs[i], kind p_kinds[i], body p_bodies[i]. A run's elements share one fence and
--   carry consecutive numbers in array order (the attempt numbers its writes 1, 2, 3, …
--   in send order). Whole-call refusals, nothing written: 22004 when an array is null,
--   22023 when the arrays differ in length. Empty arrays return no rows.
-- * Each run's outputs are applied as runlane.append_output would apply them one by one,
--   with the same fencing (runlane._require_owner: the run's row locked FOR NO KEY
--   UPDATE, its computer lease row FOR SHARE), write numbers (runlane._write_applied,
--   runlane._refuse_write_number), Stop fence (runlane._refuse_stopped), first response
--   and notification; except that a run succeeds or fails whole and alone: one run
--   refused never fails or holds back another.
-- * One row per distinct run, in order of first appearance, with outcome:
--   - 'applied': its new outputs are written (elements whose numbers were applied
--     already are skipped), its last number recorded (runs.write_fence, write_seq);
--   - 'resent': every number was applied already under that fence (a lost reply):
--     nothing written, even once the run has finished;
--   - 'refused': nothing of the run written; sqlstate, column_name and message are the
--     error, in this order: no run id (RL008); a null fence or number (22004); a first
--     number below 1 (22023); fences that differ or numbers not consecutive (22023,
--     column write_seq); then, element by element in array order, the first error
--     append_output would raise for it: 22004 a null kind or body, 22023 a body over
--     1 MB (runlane._check_body) or an unknown kind, then for the first element not yet
--     applied RL008 unknown run, RL001 fenced out, not running or off its computer,
--     22023 (column write_seq) a number that skips ahead, RL001 stopped (cancel_run).
--     The error is reported, not raised (no subtransaction per run), with the message
--     the raising helper writes (test_append_outputs__refusals_as_append_output.sql
--     compares them).
--   first_response is the run.first_response row when its new outputs stamp it, else,
--   when an element applied already is visible, runlane._resent_first_response's row
--   (the lost reply may have carried it), else null.
-- * The whole call fails only for its arrays, a lock wait over lock_timeout (55P03) or a
--   deadlock (40P01); nothing is written then, and it may be resent as it was.
-- * Output ids increase in number order within a run, and runs are locked in run_id order
--   (two calls never deadlock on each other's runs), then their computer leases in
--   computer order.
-- * The first visible output (text, final, message_tool, card) stamps first_response_at =
--   clock_timestamp() once for the run's life; that run's row carries first_response =
--   runlane._timing_row(run, 'run.first_response') (null when it fails).
-- * One {"stream": token} notification on runlane_outputs per applied run, the secret read
--   once (runlane._notify, runlane._stream_token); a failing notification never fails the
--   write.
-- * Set-based: a fixed handful of statements for the whole call, no statement or
--   subtransaction per run or output (the notification's guard is one per call).
create or replace function runlane.append_outputs(
    p_run_ids bigint[], p_fences bigint[], p_seqs bigint[], p_kinds text[], p_bodies text[]
)
returns table (
    run_id bigint, outcome text, first_response jsonb, sqlstate text, column_name text, message text
)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_n integer;
    v_locked runlane.runs[];  -- the call's known runs, as locked
    -- per run, in order of first appearance:
    v_ids bigint[];
    v_codes text[];  -- 'apply', 'resent', or why it is refused
    v_at integer[];  -- its first element with a bad argument
    v_fences bigint[];
    v_firsts bigint[];  -- its first number in the call
    v_lasts bigint[];  -- its last number in the call
    v_applied bigint[];  -- the last number the run applied under that fence (0 for none)
    v_stamps boolean[];  -- whether its new outputs stamp the first response
    v_visibles boolean[];  -- whether any of its elements applied already is visible
    v_computers text[];  -- the computer of a bound run that reached the computer check
    v_holding bigint[];  -- the bound runs that hold their computer
    v_written bigint[];  -- the runs whose outputs were written
    v_org text := nullif(current_setting('runlane.org_id', true), '');
    v_first_response_at timestamptz;
    v_locking_org text;  -- on Citus, unnamed: the organization whose runs are locked next
begin
    -- GUARD: the call's arrays (a caller bug: nothing is written).
    if p_run_ids is null or p_fences is null or p_seqs is null or p_kinds is null or p_bodies is null then
        raise exception 'every array is required (pass empty arrays for no outputs)'
            using errcode = '22004';
    end if;
    v_n := cardinality(p_run_ids);
    if cardinality(p_fences) <> v_n or cardinality(p_seqs) <> v_n or cardinality(p_kinds) <> v_n
        or cardinality(p_bodies) <> v_n then
        raise exception 'the arrays differ in length'
            using errcode = '22023',
                  hint = 'Pass one run id, fence, write number, kind and body per output.';
    end if;
    if v_n = 0 then
        return;
    end if;

    -- STEP: lock the call's runs, in run_id order: those of the organization the session
    -- names (runlane.org_id: on Citus, one node), or of any. On a schema Citus
    -- distributes, without a name, organization by organization (a locking read names
    -- one, in organization order), then the locked rows are read together.
    if v_org is null and runlane._citus_distributed('runlane.runs') then
        for v_locking_org in
            select distinct r.org_id from runlane.runs as r where r.run_id = any(p_run_ids) order by 1
        loop
            perform
            from runlane.runs as r
            where r.run_id = any(p_run_ids) and r.org_id = v_locking_org
            order by r.run_id
            for no key update;
        end loop;
        select array_agg(l.r order by (l.r).run_id) into v_locked
        from (select r from runlane.runs as r where r.run_id = any(p_run_ids)) as l;
    else
        select array_agg(l.r order by (l.r).run_id) into v_locked
        from (
            select r
            from runlane.runs as r
            where r.run_id = any(p_run_ids)
              and (v_org is null or r.org_id = v_org)
            order by r.run_id
            for no key update
        ) as l;
    end if;

    -- STEP: each run's case, from its elements and its locked row.
    select
        array_agg(c.run_id order by c.first_i),
        array_agg(c.code order by c.first_i),
        array_agg(c.at order by c.first_i),
        array_agg(c.fence order by c.first_i),
        array_agg(c.seq1 order by c.first_i),
        array_agg(c.last order by c.first_i),
        array_agg(c.applied order by c.first_i),
        array_agg(c.stamp order by c.first_i),
        array_agg(c.visible order by c.first_i),
        array_agg(c.computer_id order by c.first_i)
    into v_ids, v_codes, v_at, v_fences, v_firsts, v_lasts, v_applied, v_stamps, v_visibles, v_computers
    from (
        select
            g.run_id,
            g.first_i,
            g.fence,
            g.seq1,
            g.last,
            k.applied,
            coalesce(s.early, s.late) as code,
            g.bad_at as at,
            r.first_response_at is null and true = any(g.visibles[k.new_k:g.n]) as stamp,
            true = any(g.visibles[1:k.new_k - 1]) as visible,  -- an element applied already is visible
            case when s.early is null then r.computer_id end as computer_id  -- its lease is checked next
        from (
            select
                e.run_id,
                min(e.i) as first_i,
                count(*)::integer as n,
                min(e.fence1) as fence,
                min(e.seq1) as seq1,
                bool_or(e.fence is null or e.seq is null) as unnumbered,
                bool_and(e.fence = e.fence1 and e.seq::numeric - e.seq1 = e.k - 1) as shaped,
                max(e.seq) as last,
                min(e.i) filter (where e.bad is not null) as bad_at,
                (array_agg(e.bad order by e.i) filter (where e.bad is not null))[1] as bad,
                array_agg(e.i order by e.i) as positions,
                array_agg(e.visible order by e.i) as visibles
            from (
                select
                    u.run_id,
                    u.fence,
                    u.seq,
                    u.i::integer as i,
                    first_value(u.fence) over w as fence1,
                    first_value(u.seq) over w as seq1,
                    row_number() over w as k,
                    case
                        when u.kind is null or u.body is null then 'null'
                        when octet_length(u.body) > 1048576 then 'body'  -- runlane._check_body's bound
                        when u.kind not in (
                            'text', 'final', 'message_tool', 'card',
                            'reasoning', 'placeholder', 'progress', 'metadata'
                        ) then 'kind'
                    end as bad,
                    coalesce(u.kind in ('text', 'final', 'message_tool', 'card'), false) as visible
                from unnest(p_run_ids, p_fences, p_seqs, p_kinds, p_bodies) with ordinality
                    as u (run_id, fence, seq, kind, body, i)
                window w as (partition by u.run_id order by u.i)
            ) as e
            group by e.run_id
        ) as g
        left join unnest(v_locked) as r on r.run_id = g.run_id
        -- the last number applied under the call's fence, and the run's first element above it
        cross join lateral (
            select
                a.applied,
                case when g.seq1 >= 1 then least(greatest(a.applied - g.seq1 + 1, 0), g.n)::integer + 1 end as new_k
            from (select coalesce(case when r.write_fence = g.fence then r.write_seq end, 0) as applied) as a
        ) as k
        -- its refusal before the computer check (early), else after it or none (late)
        cross join lateral (
            select
                case
                    when g.run_id is null then 'no_id'
                    when g.unnumbered then 'unnumbered'
                    when g.seq1 < 1 then 'seq_range'
                    when not g.shaped then 'shape'
                    -- an argument error on or before the first element not applied yet
                    when g.bad_at <= coalesce(g.positions[k.new_k], g.bad_at) then g.bad
                    when k.new_k > g.n then 'resent'
                    when r.run_id is null then 'unknown'
                    when r.fence <> g.fence or r.state <> 'running' then 'fenced'
                end as early,
                case
                    when g.seq1 - 1 > k.applied then 'skip'
                    when r.reason = 'cancel_requested' then 'stopped'
                    when g.bad_at is not null then g.bad  -- an argument error further on
                    else 'apply'
                end as late
        ) as s
    ) as c;

    -- GUARD: a run on a computer writes only while it holds it; its lease row is locked FOR
    -- SHARE until commit (in computer order), so a claim taking the computer over waits.
    if exists (
        select from unnest(v_computers) as c (computer_id) where c.computer_id is not null
    ) then
        select array_agg(x.run_id) into v_holding
        from (
            select c.run_id, c.computer_id, c.fence
            from unnest(v_ids, v_computers, v_fences) as c (run_id, computer_id, fence)
            where c.computer_id is not null
            order by c.computer_id
        ) as x
        cross join lateral (
            select
            from runlane.computer_leases as cl
            where cl.computer_id = x.computer_id and cl.run_id = x.run_id and cl.fence = x.fence
            for share
        ) as held;
        v_codes := array(
            select case
                when c.computer_id is not null and not c.run_id = any(coalesce(v_holding, '{}'))
                    then 'computer'
                else c.code
            end
            from unnest(v_ids, v_codes, v_computers) with ordinality as c (run_id, code, computer_id, position)
            order by c.position
        );
    end if;

    -- STEP: the outputs not applied yet, in number order per run, and each run's record:
    -- its last number, and the first response its first visible output stamps.
    if 'apply' = any(v_codes) then
        perform
        from (
            select
                array_agg(e.run_id order by e.run_id, e.i) as run_ids,
                array_agg(l.org_id order by e.run_id, e.i) as org_ids,
                array_agg(l.attempts order by e.run_id, e.i) as attempts,
                array_agg(e.kind order by e.run_id, e.i) as kinds,
                array_agg(e.body order by e.run_id, e.i) as bodies
            from unnest(p_run_ids, p_seqs, p_kinds, p_bodies) with ordinality as e (run_id, seq, kind, body, i)
            inner join unnest(v_ids, v_codes, v_applied) as a (run_id, code, applied)
                on a.run_id = e.run_id and a.code = 'apply'
            inner join unnest(v_locked) as l on l.run_id = a.run_id
            where e.seq > a.applied
        ) as w
        cross join lateral runlane._write_run_outputs(w.run_ids, w.org_ids, w.attempts, w.kinds, w.bodies);

        v_first_response_at := clock_timestamp();  -- (Citus: no volatile call in the update)
        with applying as (
            select a.run_id, l.org_id, a.position, a.fence, a.last, a.stamp
            from unnest(v_ids, v_codes, v_fences, v_lasts, v_stamps) with ordinality
                as a (run_id, code, fence, last, stamp, position)
            inner join unnest(v_locked) as l on l.run_id = a.run_id
            where a.code = 'apply'
        ),
        recorded as (
            update runlane.runs as r
            set write_fence = a.fence,
                write_seq = a.last,
                first_response_at = coalesce(r.first_response_at, case when a.stamp then v_first_response_at end)
            from applying as a
            where r.run_id = a.run_id
              and r.org_id = a.org_id
              and (v_org is null or r.org_id = v_org)
            returning r.run_id, a.position
        )
        select array_agg(d.run_id order by d.position) into v_written
        from recorded as d;

        begin
            perform runlane._notify(
                'runlane_outputs',
                array(
                    select json_build_object('stream', t.token)::text
                    from unnest(runlane._stream_token(v_written)) as t (token)
                )
            );
        exception when others then
            null;  -- a hint only: chat clients page with outputs_since after a reconnect
        end;
    end if;

    -- STEP: one row per run, in order of first appearance.
    return query
    select
        c.run_id,
        case c.code when 'apply' then 'applied' when 'resent' then 'resent' else 'refused' end,
        case
            when c.code = 'apply' and c.stamp then runlane._timing_row(c.run_id, 'run.first_response')
            -- (a lost reply may have carried it: as append_output answers a resent element)
            when c.code in ('apply', 'resent') and c.visible then runlane._resent_first_response(r, c.fence)
        end,
        case c.code
            when 'apply' then null
            when 'resent' then null
            when 'no_id' then 'RL008'
            when 'unnumbered' then '22004'
            when 'null' then '22004'
            when 'unknown' then 'RL008'
            when 'fenced' then 'RL001'
            when 'computer' then 'RL001'
            when 'stopped' then 'RL001'
            else '22023'
        end::text,
        case when c.code in ('shape', 'skip') then 'write_seq' end::text,
        case c.code
            when 'no_id' then 'run id is required'
            when 'unnumbered' then format(
                'run %s: each output needs its fence and a write number', c.run_id)
            when 'seq_range' then format('write sequence number %s is out of range', c.first_seq)
            when 'shape' then format(
                'run %s: its outputs in one call share one fence and carry consecutive write numbers '
                || 'in array order, from %s under fence %s', c.run_id, c.first_seq, c.fence)
            when 'null' then 'an output needs a kind and a body'
            when 'body' then format(
                'a output body is at most 1 MB (1048576 bytes), got %s bytes', octet_length(p_bodies[c.at]))
            when 'kind' then format('unknown output kind %s', runlane._quote_for_error(p_kinds[c.at]))
            when 'unknown' then format('unknown run %s', c.run_id)
            when 'fenced' then format(
                'lease lost: run %s is %s with fence %s, the caller holds fence %s',
                c.run_id, r.state, r.fence, c.fence)
            when 'computer' then format(
                'lease lost: run %s no longer holds computer %s', c.run_id, r.computer_id)
            when 'skip' then format(
                'write number %s skips ahead: run %s under fence %s has applied writes 1 to %s, so the next is %s',
                c.first_seq, c.run_id, c.fence, c.applied, c.applied + 1)
            when 'stopped' then format('run %s was stopped (cancel_run): it writes nothing more', c.run_id)
        end
    from unnest(v_ids, v_codes, v_at, v_fences, v_firsts, v_applied, v_stamps, v_visibles) with ordinality
        as c (run_id, code, at, fence, first_seq, applied, stamp, visible, position)
    left join unnest(v_locked) as r on r.run_id = c.run_id
    order by c.position;
end;
$$;

comment on function runlane.append_outputs(bigint[], bigint[], bigint[], text[], text[]) is
'Appends many runs'' outputs in one call, each run as append_output would (fenced, numbered, '
'stopped-refused, first response stamped, notified): one row per run, outcome applied, resent '
'(nothing written, first_response again) or refused (nothing of the run written; sqlstate, '
'column_name, message). 22004 / 22023 for null or unequal arrays.';

revoke all on function runlane.append_outputs(bigint[], bigint[], bigint[], text[], text[]) from public;
grant execute on function runlane.append_outputs(bigint[], bigint[], bigint[], text[], text[]) to runlane_worker;
