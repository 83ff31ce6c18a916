-- The maintenance leadership is a lease: won when free or lapsed, renewed only by its
-- holder, handed back only by its holder; arguments are validated, the lease at most 60
-- seconds long (a holder that stops renewing holds maintenance up no longer).
begin;
select plan(23);

select is(runlane.lead_maintenance('w1', interval '10 seconds'), true, 'a free lease is won');
select is((select leader from runlane.leader where role = 'maintenance'), 'w1', 'the row names its holder');
select is(
    runlane.lead_maintenance('w2', interval '10 seconds'), false,
    'another worker cannot take a running lease'
);
select is((select leader from runlane.leader), 'w1', 'and changes nothing');

do $$
declare
    v_earlier timestamptz := (select l.expires_at - interval '5 seconds' from runlane.leader as l);
begin
    update runlane.leader set expires_at = v_earlier;
end
$$;
create temp table before_renewal on commit drop as select * from runlane.leader;
select is(runlane.lead_maintenance('w1', interval '10 seconds'), true, 'the holder renews');
select cmp_ok(
    (select expires_at from runlane.leader), '>', (select expires_at from before_renewal),
    'a renewal moves the expiry'
);
select is(
    (select acquired_at from runlane.leader), (select acquired_at from before_renewal),
    'a renewal keeps the acquisition time'
);

-- The holder was paused: its lease lapsed.
update runlane.leader
set renewed_at = now() - interval '20 seconds', expires_at = now() - interval '1 second';
select is(runlane.lead_maintenance('w2', interval '10 seconds'), true, 'a lapsed lease is taken over');
select is((select leader from runlane.leader), 'w2', 'by the new leader');
select cmp_ok(
    (select acquired_at from runlane.leader), '>', (select acquired_at from before_renewal),
    'with a new acquisition time'
);
select is(
    runlane.lead_maintenance('w1', interval '10 seconds'), false,
    'the old holder, resumed, cannot renew a lease it lost'
);

select is(runlane.resign_maintenance('w1'), false, 'only the holder can hand the lease back');
select is((select leader from runlane.leader), 'w2', 'so w2 still leads');
select is(runlane.resign_maintenance('w2'), true, 'the holder hands it back');
select is(runlane.lead_maintenance('w1', interval '10 seconds'), true, 'and anyone may win it at once');

select throws_ok(
    $$select runlane.lead_maintenance(null, interval '10 seconds')$$, '22004', null, 'a null worker id is refused'
);
select throws_ok(
    $$select runlane.lead_maintenance('w1', null)$$, '22004', null, 'a null ttl is refused'
);
select throws_ok(
    format('select runlane.lead_maintenance(%L, interval %L)', E' \t\u3000', '10 seconds'), '22023', null,
    'a blank worker id (tab, ideographic space) is refused'
);
select throws_ok(
    format('select runlane.lead_maintenance(%L, interval %L)', repeat('w', 257), '10 seconds'), '22023', null,
    'a worker id over 256 characters is refused'
);
select throws_ok(
    $$select runlane.lead_maintenance('w1', interval '0.5 seconds')$$, '22023', null,
    'a ttl under one second is refused'
);
select throws_like(
    $$select runlane.lead_maintenance('w1', interval '1 hour')$$,
    '%between 1 second and 60 seconds%', 'an hour''s lease is refused, naming the bound'
);
select throws_ok(
    $$select runlane.lead_maintenance('w1', interval '61 seconds')$$, '22023', null, 'a ttl over 60 seconds is refused'
);
select is(
    runlane.lead_maintenance('w1', interval '60 seconds'), true, 'a ttl of 60 seconds is taken'
);

select * from finish();
rollback;
