-- append_outputs stamps a run's first response with its first visible output (text,
-- final, message_tool, card), once for the run's life: hidden outputs stamp nothing, a
-- later call never moves the stamp, and only the call that stamps returns the
-- run.first_response timing row.
begin;
select plan(7);

do $$
begin
    perform runlane_test.agent('agent-f', 'org-f');
    perform runlane_test.claimed(runlane_test.queued_run('agent-f', 'interactive', 'interactive'));
end
$$;
create temp table k on commit drop as
select runlane_test.last_run('agent-f') as run_id;

create function pg_temp.send(p_seq bigint, p_kinds text[])
returns jsonb
language sql
as $$
    select o.first_response
    from runlane.append_outputs(
        array(select (select run_id from k) from unnest(p_kinds)),
        array(select 1::bigint from unnest(p_kinds)),
        array(select p_seq + n.i - 1 from unnest(p_kinds) with ordinality as n (kind, i)),
        p_kinds,
        array(select 'body' from unnest(p_kinds))
    ) as o;
$$;

select is(
    pg_temp.send(1, array['reasoning', 'placeholder', 'progress', 'metadata']),
    null,
    'hidden outputs return no first response'
);
select is(
    (select first_response_at from runlane.runs where run_id = (select run_id from k)),
    null,
    'and stamp none'
);
select is(
    pg_temp.send(5, array['progress', 'message_tool', 'text']) ->> 'event',
    'run.first_response',
    'the first visible output returns the run.first_response row'
);
select ok(
    (
        select r.first_response_at > r.first_started_at
        from runlane.runs as r where r.run_id = (select run_id from k)
    ),
    'and stamps first_response_at'
);
create temp table stamp on commit drop as
select first_response_at from runlane.runs where run_id = (select run_id from k);
select is(
    pg_temp.send(8, array['final', 'card']),
    null,
    'a later visible output returns no first response'
);
select is(
    (select first_response_at from runlane.runs where run_id = (select run_id from k)),
    (select first_response_at from stamp),
    'and leaves the stamp as it is'
);
select is(
    (
        select (t ->> 'run.first_response_ms')::numeric
        from runlane.run_timing((select run_id from k)) as t
    ) is not null,
    true,
    'run_timing reports the first response'
);

select * from finish();
rollback;
