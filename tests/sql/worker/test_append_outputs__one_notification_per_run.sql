-- append_outputs sends one {"stream": token} notification on runlane_outputs per applied
-- run (however many outputs it wrote), through runlane._notify's array form, and none for
-- a run refused or resent. A failing notification never fails the write. runlane._notify
-- is replaced inside this transaction (rolled back below) by one that records its calls.
begin;
select plan(7);

create temp table notified (channel text, payloads text[]) on commit drop;
create or replace function runlane._notify(p_channel text, p_payloads text[])
returns boolean
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    insert into pg_temp.notified (channel, payloads) values (p_channel, p_payloads);
    return true;
end;
$$;

do $$
begin
    perform runlane_test.agent('agent-n1', 'org-n');
    perform runlane_test.agent('agent-n2', 'org-n');
    perform runlane_test.agent('agent-n3', 'org-n');
    perform runlane_test.claimed(runlane_test.queued_run('agent-n1', 'interactive', 'interactive'));
    perform runlane_test.claimed(runlane_test.queued_run('agent-n2', 'interactive', 'interactive'));
    perform runlane_test.claimed(runlane_test.queued_run('agent-n3', 'interactive', 'interactive'));
end
$$;
create temp table k on commit drop as
select
    runlane_test.last_run('agent-n1') as r1,
    runlane_test.last_run('agent-n2') as r2,
    runlane_test.last_run('agent-n3') as r3;
do $$ begin perform runlane_test.claimed((select r2 from k)); end $$;  -- run 2: fenced out

create function pg_temp.batch()
returns setof text
language sql
as $$
    select o.outcome
    from runlane.append_outputs(
        array[(select r3 from k), (select r1 from k), (select r2 from k), (select r3 from k)],
        array[1, 1, 1, 1]::bigint[],
        array[1, 1, 1, 2]::bigint[],
        array['text', 'progress', 'text', 'text'],
        array['three', 'one', 'two', 'three again']
    ) as o;
$$;

select results_eq(
    'select * from pg_temp.batch()',
    $$values ('applied'::text), ('applied'), ('refused')$$,
    'runs 3 and 1 are applied, run 2 refused'
);
select results_eq(
    'select channel, payloads from notified',
    $$values (
        'runlane_outputs'::text,
        array[
            json_build_object('stream', runlane._stream_token((select r3 from k)))::text,
            json_build_object('stream', runlane._stream_token((select r1 from k)))::text
        ]
    )$$,
    'one call with one {"stream": token} per applied run, in order of first appearance'
);
select ok(
    (
        select bool_and(p.payload::jsonb ->> 'stream' ~ '^[0-9a-f]{32}$')
        from notified, unnest(notified.payloads) as p (payload)
    ),
    'each payload is the run''s 32-digit token only'
);

truncate notified;
select results_eq(
    'select * from pg_temp.batch()',
    $$values ('resent'::text), ('resent'), ('refused')$$,
    'the batch again: resent and refused'
);
select is((select count(*)::int from notified), 0, 'no notification for runs resent or refused');

create or replace function runlane._notify(p_channel text, p_payloads text[])
returns boolean
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    raise exception 'too many notifications in the NOTIFY queue' using errcode = '54000';
end;
$$;
select is(
    (
        select o.outcome
        from runlane.append_outputs(
            array[(select r1 from k)], array[1]::bigint[], array[2]::bigint[], array['text'], array['one more']
        ) as o
    ),
    'applied',
    'a failing notification never fails the call'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select r1 from k)),
    2,
    'nor the write'
);

select * from finish();
rollback;
