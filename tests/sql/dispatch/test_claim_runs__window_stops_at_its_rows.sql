-- The fair window reads the oldest queued runs in runs_claim_order_idx order and stops
-- after 4 x the runs it needs, whatever the statistics say: with one organization in
-- them, a window that also named the organizations left out ("org_id <> all(...)",
-- estimated to keep no row) was planned generically as a bitmap read of the whole queue
-- and a sort (10-15 ms for a worker's first claim at 20,000 queued runs, issue 15).
begin;
select plan(4);

do $$
begin
    perform runlane_test.org('org-w', 1000);
    perform runlane_test.agent('w-1', 'org-w');
end
$$;

insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
select
    'org-w' as org_id,
    'w-1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model
from generate_series(1, 3000) as g;

-- statistics taken with every run queued, in one organization (a drain's start), on
-- every table as autovacuum keeps them (the empty computer_leases' among them: with only
-- runs analyzed the old window happened to be planned on its index)
analyze;

-- A first claim, which also steps over the index entries of runs other tests rolled back
-- (they come first in run_id order) and marks them dead. Its one organization sends this
-- session's later claims past the window (runlane.claim_skip_window): the measured
-- claim is told to read it again.
create temp table first_claim on commit drop as
select c.run_id
from runlane.claim_runs('w-window', array['interactive'], 10) as c;
select set_config('runlane.claim_skip_window', 'off', false);

create temp table before_claim on commit drop as
select pg_stat_get_xact_tuples_returned('runlane.runs_claim_order_idx'::regclass) as entries;

create temp table claimed on commit drop as
select c.run_id
from runlane.claim_runs('w-window', array['interactive'], 10) as c;

select is(
    (select array_agg(c.run_id order by c.run_id) from first_claim as c),
    (
        select array_agg(r.run_id order by r.run_id)
        from (
            select q.run_id from runlane.runs as q
            where q.agent_id = 'w-1'
            order by q.run_id
            limit 10
        ) as r
    ),
    'the first claim takes the ten oldest runs'
);
select is(
    (select array_agg(c.run_id order by c.run_id) from claimed as c),
    (
        select array_agg(r.run_id order by r.run_id)
        from (
            select q.run_id from runlane.runs as q
            where q.agent_id = 'w-1'
            order by q.run_id
            limit 10 offset 10
        ) as r
    ),
    'the second the next ten'
);
select cmp_ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_claim_order_idx'::regclass)
    - (select b.entries from before_claim as b),
    '>',
    0::bigint,
    'the window reads runs_claim_order_idx'
);
select cmp_ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_claim_order_idx'::regclass)
    - (select b.entries from before_claim as b),
    '<',
    300::bigint,
    'and stops after a few of its entries, not the 2,990 queued runs'
);

select * from finish();
rollback;
