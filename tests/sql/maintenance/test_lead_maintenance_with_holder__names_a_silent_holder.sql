-- lead_maintenance_with_holder wins or renews as lead_maintenance does and names the other
-- worker that held the lease before the call: its id, the time since its last renewal,
-- its lease length and whether the lease had lapsed, so a follower can tell a holder that
-- stopped renewing. Nothing is named for a free lease or the caller's own.
begin;
select plan(9);

select results_eq(
    $$select won, holder from runlane.lead_maintenance_with_holder('w1', interval '10 seconds')$$,
    $$values (true, null::text)$$,
    'a free lease is won, no holder named'
);
select results_eq(
    $$select won, holder from runlane.lead_maintenance_with_holder('w1', interval '10 seconds')$$,
    $$values (true, null::text)$$,
    'a renewal names no holder'
);
select results_eq(
    $$select won, holder, holder_ttl_ms, holder_lapsed
      from runlane.lead_maintenance_with_holder('w2', interval '10 seconds')$$,
    $$values (false, 'w1'::text, 10000::bigint, false)$$,
    'a follower is told who holds the running lease, and its length'
);
select cmp_ok(
    (select holder_silent_ms from runlane.lead_maintenance_with_holder('w2', interval '10 seconds')),
    '<', 10000::bigint,
    'a holder that just renewed is not silent long'
);

-- The holder stopped renewing 8 seconds ago: more than half its lease.
update runlane.leader
set renewed_at = now() - interval '8 seconds', expires_at = now() + interval '2 seconds';
select results_eq(
    $$select won, holder, holder_silent_ms >= 8000, holder_lapsed
      from runlane.lead_maintenance_with_holder('w2', interval '10 seconds')$$,
    $$values (false, 'w1'::text, true, false)$$,
    'a silent holder is named with the time since its renewal; its lease still runs'
);

-- Its lease lapsed: the follower takes it over and is told whose it was.
update runlane.leader
set renewed_at = now() - interval '12 seconds', expires_at = now() - interval '2 seconds';
select results_eq(
    $$select won, holder, holder_silent_ms >= 12000, holder_lapsed
      from runlane.lead_maintenance_with_holder('w2', interval '10 seconds')$$,
    $$values (true, 'w1'::text, true, true)$$,
    'a lapsed lease is taken over, naming the holder that let it lapse'
);
select is((select leader from runlane.leader), 'w2', 'the follower holds it now');

select throws_ok(
    $$select * from runlane.lead_maintenance_with_holder('w2', interval '1 hour')$$,
    '22023', null, 'the same bound: an hour''s lease is refused'
);
select throws_ok(
    $$select * from runlane.lead_maintenance_with_holder(null, interval '10 seconds')$$,
    '22004', null, 'a null worker id is refused'
);

select * from finish();
rollback;
