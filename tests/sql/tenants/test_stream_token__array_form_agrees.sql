-- runlane._stream_token's array form gives each run the token its single form gives,
-- in the order asked; runlane._notify_stream_end's array form accepts an empty batch.
begin;
select plan(3);

select is(
    runlane._stream_token(array[42, 7, 42, 9000000000]::bigint[]),
    array[
        runlane._stream_token(42::bigint), runlane._stream_token(7::bigint),
        runlane._stream_token(42::bigint), runlane._stream_token(9000000000::bigint)
    ],
    'the same tokens, in the order asked'
);
select is(runlane._stream_token('{}'::bigint[]), '{}'::text[], 'no runs: no tokens');
select lives_ok($$select runlane._notify_stream_end('{}'::bigint[])$$, 'an empty batch sends nothing');

select * from finish();
rollback;
