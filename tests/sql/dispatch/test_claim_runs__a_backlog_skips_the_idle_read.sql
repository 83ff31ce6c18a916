-- The idle statement (one read of the oldest p_limit + 1 eligible runs of each lane,
-- runs_handler_claim_order_idx) answers when every eligible run fits in the claim. A session
-- whose claim found a backlog (runlane.claim_backlog, kept by the claim itself) goes to
-- the fair path at once on its next claims, and turns back to the idle statement once a
-- read held the whole queue.
begin;
select plan(6);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
    perform set_config('runlane.claim_skip_window', 'on', true);  -- the loose scan first
    perform runlane_test.chat_backlog('a-1', 30);
end
$$;

create temp table scans (label text, n bigint) on commit drop;

insert into scans values ('start', pg_stat_get_xact_numscans('runlane.runs_handler_claim_order_idx'::regclass));
select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 10, interval '60 seconds', null, false, array['default'])),
    10::bigint,
    'a claim of 10 from a queue of 30 takes 10'
);
insert into scans values ('first', pg_stat_get_xact_numscans('runlane.runs_handler_claim_order_idx'::regclass));

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 10, interval '60 seconds', null, false, array['default'])),
    10::bigint,
    'so does the next claim of the session'
);
insert into scans values ('second', pg_stat_get_xact_numscans('runlane.runs_handler_claim_order_idx'::regclass));

select is(
    (select s2.n - s1.n from scans as s1, scans as s2 where s1.label = 'first' and s2.label = 'second'),
    0::bigint,
    'which, after a backlog, skips the idle read of runs_handler_claim_order_idx'
);

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 20, interval '60 seconds', null, false, array['default'])),
    10::bigint,
    'a claim of 20 takes the last 10: its read held the whole queue'
);

do $$ begin perform runlane_test.chat_backlog('a-1', 1, 'late-'); end $$;
insert into scans values ('drained', pg_stat_get_xact_numscans('runlane.runs_handler_claim_order_idx'::regclass));

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 10, interval '60 seconds', null, false, array['default'])),
    1::bigint,
    'a run queued after the drain is claimed'
);

select cmp_ok(
    pg_stat_get_xact_numscans('runlane.runs_handler_claim_order_idx'::regclass) - (select s.n from scans as s where s.label = 'drained'),
    '>=',
    1::bigint,
    'by the idle read again'
);

select * from finish();
rollback;
