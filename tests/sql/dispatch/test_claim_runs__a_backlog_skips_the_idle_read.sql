-- The idle statement (one read of up to p_limit + 1 eligible runs per class through
-- runs_fair_claim_idx) answers when every eligible run fits in the claim. A session whose
-- claim found a backlog (runlane.claim_backlog, kept by the claim itself) goes to the fair
-- path at once on its next claims, and turns back to the idle statement once a read held
-- the whole queue. The fair path's loose scan reads runs_fair_claim_idx too, so the path
-- a claim took is read from the setting the claim keeps, and the idle read from its two
-- descents of the index (one per class) with nothing else.
begin;
select plan(8);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
    perform set_config('runlane.claim_skip_window', 'on', true);  -- the loose scan first
    perform set_config('runlane.claim_backlog', 'off', true);  -- (an idle session)
    perform runlane_test.chat_backlog('a-1', 30);
end
$$;

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 10)),
    10::bigint,
    'a claim of 10 from a queue of 30 takes 10'
);
select is(
    current_setting('runlane.claim_backlog'),
    'on',
    'its idle read found more than it could take: the session has a backlog'
);

create temp table before_second on commit drop as
select pg_stat_get_xact_tuples_fetched('runlane.runs_fair_claim_idx'::regclass) as entries;
select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 10)),
    10::bigint,
    'so does the next claim of the session'
);
select cmp_ok(
    pg_stat_get_xact_tuples_fetched('runlane.runs_fair_claim_idx'::regclass)
    - (select b.entries from before_second as b),
    '<=',
    21::bigint,
    'which read the queue once, on the fair path: its 20 runs and a head (the idle read '
    || 'first would add 11)'
);
select is(
    current_setting('runlane.claim_backlog'),
    'off',
    'that read held the whole queue (20 runs, 28 candidates wanted): no backlog now'
);

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 20)),
    10::bigint,
    'a claim of 20 takes the last 10'
);

do $$ begin perform runlane_test.chat_backlog('a-1', 1, 'late-'); end $$;
create temp table scans on commit drop as
select pg_stat_get_xact_numscans('runlane.runs_fair_claim_idx'::regclass) as n;

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 10)),
    1::bigint,
    'a run queued after the drain is claimed'
);

select is(
    pg_stat_get_xact_numscans('runlane.runs_fair_claim_idx'::regclass) - (select s.n from scans as s),
    2::bigint,
    'by the idle read again: one descent per class, no loose scan'
);

select * from finish();
rollback;
