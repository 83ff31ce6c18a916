-- _claim_replay: the rows of a keyed claim resent with the key of the recorded one.
--
-- Guarantees: returns, in the receipt's order, each recorded run still running under the
-- fence the claim gave it (a run since finished, released or reclaimed is left out), as
-- claim_runs returns a claimed run (skipped_reason null); then, with p_report_skipped,
-- each recorded skipped run (fence -1 in the receipt) still skipped, as claim_runs
-- reports one. Reads only: a resend claims nothing.
create or replace function runlane._claim_replay(
    p_ids bigint[],
    p_fences bigint[],
    p_report_skipped boolean
)
returns table (
    run_id bigint,
    fence bigint,
    attempt int,
    lane text,
    trigger text,
    agent_id text,
    org_id text,
    thread_id text,
    prompt text,
    model text,
    checkpoint jsonb,
    iteration_cap int,
    late_notice jsonb,
    timing jsonb,
    skipped_reason text
)
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select
        r.run_id,
        r.fence,
        r.attempts,
        r.lane,
        r.trigger,
        r.agent_id,
        r.org_id,
        r.thread_id,
        r.prompt,
        r.model,
        r.checkpoint,
        s.agent_iteration_cap,
        runlane._late_notice(r),
        runlane._timing_row(r.run_id, 'run.execution_started'),
        null::text
    from unnest(p_ids, p_fences) with ordinality as u (run_id, fence, position)
    join runlane.runs as r on r.run_id = u.run_id and r.fence = u.fence and r.state = 'running'
    join runlane.platform_settings as s on s.org_id = r.org_id
    order by u.position;
    if p_report_skipped then
        return query
        select
            r.run_id, r.fence, r.attempts, r.lane, r.trigger, r.agent_id, r.org_id,
            r.thread_id, null::text, r.model, null::jsonb, null::int, null::jsonb,
            null::jsonb, r.reason
        from unnest(p_ids, p_fences) with ordinality as u (run_id, fence, position)
        join runlane.runs as r on r.run_id = u.run_id
        where u.fence = -1 and r.state = 'skipped'
        order by u.position;
    end if;
end;
$$;

comment on function runlane._claim_replay(bigint[], bigint[], boolean) is
'claim_runs'' answer to a resend: the recorded runs still running under their fences, then '
'(with p_report_skipped) the recorded skipped runs.';

revoke all on function runlane._claim_replay(bigint[], bigint[], boolean) from public;
