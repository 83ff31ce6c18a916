-- An organization the claim leaves out (at the per-worker bound, runlane.max_per_org) is
-- stepped over, not read: a worker at its bound for org-a, whose backlog is 2,000 runs,
-- takes org-b's one queued run without reading org-a's runs one by one (the window of the
-- oldest runs, in run order, would filter them all on every claim).
begin;
select plan(3);

-- w1 runs 5 of org-a's runs (its bound of 5 is reached); org-a has 2,000 more queued,
-- org-b one.
do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
    perform runlane_test.org('org-b', 1000);
    perform runlane_test.agent('b-1', 'org-b');
    perform runlane_test.running_chat_runs('a-1', 'w1', 5);
    perform runlane_test.chat_backlog('a-1', 2000);
    perform runlane_test.chat_backlog('b-1', 1, 'b-thread-');
end
$$;

-- (statistics of this queue, as a drain's autoanalyze would have them)
analyze runlane.runs;

do $$
begin
    perform set_config('runlane.max_per_org', '5', true);  -- this transaction's claims
    perform set_config('runlane.claim_skip_window', 'off', true);  -- a fresh session
end
$$;

create temp table before_claim on commit drop as
select pg_stat_get_xact_tuples_fetched('runlane.runs_handler_claim_order_idx'::regclass) as fetched;

select is(
    (select array_agg(c.org_id) from runlane.claim_runs('w1', array['interactive'], 10) as c),
    array['org-b'],
    'w1, at its bound for org-a, takes org-b''s run'
);

select cmp_ok(
    pg_stat_get_xact_tuples_fetched('runlane.runs_handler_claim_order_idx'::regclass)
    - (select b.fetched from before_claim as b),
    '<=',
    50::bigint,
    'without fetching org-a''s 2,000 queued runs one by one'
);

select is(
    (select count(*) from runlane.runs where org_id = 'org-a' and state = 'queued'),
    2000::bigint,
    'org-a''s runs stay queued'
);

select * from finish();
rollback;
