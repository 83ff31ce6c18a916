-- outputs_since_many refuses null arrays and elements (22004), arrays of different
-- lengths, more than 1000 runs and a limit outside 1..10000 (22023).
begin;
select plan(11);

select throws_ok(
    $$select * from runlane.outputs_since_many(null, '{}'::bigint[])$$,
    '22004', null, 'a null run-id array is refused with 22004'
);
select throws_ok(
    $$select * from runlane.outputs_since_many('{}'::bigint[], null)$$,
    '22004', null, 'a null after-id array is refused with 22004'
);
select throws_ok(
    $$select * from runlane.outputs_since_many(array[1, null]::bigint[], array[0, 0]::bigint[])$$,
    '22004', null, 'a null run id is refused with 22004'
);
select throws_ok(
    $$select * from runlane.outputs_since_many(array[1, 2]::bigint[], array[0, null]::bigint[])$$,
    '22004', null, 'a null after id is refused with 22004'
);
select throws_ok(
    $$select * from runlane.outputs_since_many(array[1]::bigint[], array[0]::bigint[], null)$$,
    '22004', null, 'a null limit is refused with 22004'
);
select throws_ok(
    $$select * from runlane.outputs_since_many(array[1, 2]::bigint[], array[0]::bigint[])$$,
    '22023', 'run ids and after-output ids differ in length (2 and 1)',
    'arrays of different lengths are refused with 22023'
);
select throws_ok(
    $$select * from runlane.outputs_since_many(
        array(select g::bigint from generate_series(1, 1001) as g),
        array_fill(0::bigint, array[1001])
    )$$,
    '22023', 'at most 1000 runs per call, got 1001', 'more than 1000 runs are refused with 22023'
);
select lives_ok(
    $$select * from runlane.outputs_since_many(
        array(select g::bigint from generate_series(1, 1000) as g),
        array_fill(0::bigint, array[1000])
    )$$,
    '1000 runs are accepted'
);
select throws_ok(
    $$select * from runlane.outputs_since_many(array[1]::bigint[], array[0]::bigint[], 0)$$,
    '22023', null, 'a limit of 0 is refused with 22023'
);
select throws_ok(
    $$select * from runlane.outputs_since_many(array[1]::bigint[], array[0]::bigint[], 10001)$$,
    '22023', null, 'a limit above 10000 is refused with 22023'
);
select lives_ok(
    $$select * from runlane.outputs_since_many(array[1]::bigint[], array[0]::bigint[], 10000)$$,
    'a limit of 10000 is accepted'
);

select * from finish();
rollback;
