-- A retried run's new attempt appends through append_outputs with attempt = 2 and numbers
-- its writes from 1 again under its new fence; having started over (claimed without a
-- checkpoint), it supersedes attempt 1's visible output (superseded_through), and the
-- earlier attempt's fence is refused.
begin;
select plan(5);

do $$ begin perform runlane_test.agent('agent-s', 'org-s'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-s', 'interactive', 'interactive') as run_id;
create temp table c1 on commit drop as
select c.fence from runlane.claim_runs('w1', array['interactive']) as c;

select is(
    (
        select o.outcome
        from runlane.append_outputs(
            array[(select run_id from r), (select run_id from r)], array[(select fence from c1), (select fence from c1)],
            array[1, 2]::bigint[], array['text', 'text'], array['par', 'tial']
        ) as o
    ),
    'applied',
    'attempt 1 streams its partial output'
);
create temp table first_attempt on commit drop as
select max(o.output_id) as last_visible from runlane.outputs_since((select run_id from r)) as o;

do $$
begin
    perform runlane.retry_run((select run_id from r), (select fence from c1), 'boom', interval '0', 3);
end
$$;
create temp table c2 on commit drop as
select c.fence from runlane.claim_runs('w2', array['interactive']) as c;

select results_eq(
    format(
        $$select o.run_id, o.outcome, o.sqlstate from runlane.append_outputs(
            array[%1$s, %1$s, %1$s]::bigint[], array[%2$s, %3$s, %3$s]::bigint[], array[3, 1, 2]::bigint[],
            array['text', 'text', 'final'], array['late', 'who', 'le']) as o$$,
        (select run_id from r), (select fence from c1), (select fence from c2)
    ),
    format($$values (%s::bigint, 'refused'::text, '22023'::text)$$, (select run_id from r)),
    'one run''s elements under two fences are refused'
);
select results_eq(
    format(
        $$select o.outcome, o.sqlstate from runlane.append_outputs(
            array[%1$s, %1$s]::bigint[], array[%2$s, %2$s]::bigint[], array[1, 2]::bigint[],
            array['text', 'final'], array['who', 'le']) as o$$,
        (select run_id from r), (select fence from c2)
    ),
    $$values ('applied'::text, null::text)$$,
    'attempt 2 numbers its writes from 1 again and is applied'
);
select results_eq(
    format(
        $$select o.attempt, o.body from runlane.run_outputs as o
          where o.run_id = %s order by o.output_id$$,
        (select run_id from r)
    ),
    $$values (1, 'par'::text), (1, 'tial'), (2, 'who'), (2, 'le')$$,
    'each output carries its attempt'
);
select is(
    runlane.superseded_through((select run_id from r)),
    (select last_visible from first_attempt),
    'attempt 2 supersedes attempt 1''s output'
);

select * from finish();
rollback;
