-- A claim whose lock stopped at the room its organizations have left on the worker
-- (runlane.max_per_org) reads on for other organizations' runs, but a class whose loose
-- index scan found only organizations now at the bound is not scanned again: one
-- tenant's backlog costs the second read one scan of the other class, not two.
begin;
select plan(3);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
    perform runlane_test.chat_backlog('a-1', 300);
end
$$;

do $$
begin
    perform set_config('runlane.max_per_org', '100', true);  -- this transaction's claims
    perform set_config('runlane.claim_skip_window', 'on', true);  -- the loose scan first
end
$$;

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 90)),
    90::bigint,
    'w1 takes 90 of its 100'
);

create temp table before_claim on commit drop as
select pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass) as scans;

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 100)),
    10::bigint,
    'a page of 100 stops at the room of 10'
);

select cmp_ok(
    pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass)
    - (select b.scans from before_claim as b),
    '<=',
    5::bigint,
    'the second read scans class 1 only: class 0 held one organization, now at its bound'
);

select * from finish();
rollback;
