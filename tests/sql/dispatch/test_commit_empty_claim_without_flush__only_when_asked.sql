-- runlane._commit_empty_claim_without_flush: synchronous_commit off for the rest of the
-- transaction only on a session that set runlane.autocommit_claims = on; unset, empty or
-- off changes nothing; anything else is refused with 22023 naming the setting. Not
-- callable by applications or workers. (Its use by claim_runs, with real racing claims:
-- tests/runner/test_claim_lost_race_commits_without_flush.py.)
begin;
select plan(7);

select set_config('synchronous_commit', 'on', true);

select runlane._commit_empty_claim_without_flush();
select is(current_setting('synchronous_commit'), 'on', 'unset: the transaction stays durable');

select set_config('runlane.autocommit_claims', '', true);
select runlane._commit_empty_claim_without_flush();
select is(current_setting('synchronous_commit'), 'on', 'empty: the transaction stays durable');

select set_config('runlane.autocommit_claims', 'off', true);
select runlane._commit_empty_claim_without_flush();
select is(current_setting('synchronous_commit'), 'on', 'off: the transaction stays durable');

select set_config('runlane.autocommit_claims', 'On ', true);
select throws_ok(
    'select runlane._commit_empty_claim_without_flush()',
    '22023',
    'runlane.autocommit_claims must be on or off, got ''On '''
);
select is(current_setting('synchronous_commit'), 'on', 'malformed: refused, nothing changed');

select set_config('runlane.autocommit_claims', 'on', true);
select runlane._commit_empty_claim_without_flush();
select is(current_setting('synchronous_commit'), 'off', 'on: the commit does not wait for its flush');

select ok(
    not has_function_privilege('runlane_worker', 'runlane._commit_empty_claim_without_flush()', 'execute')
    and not has_function_privilege('runlane_api', 'runlane._commit_empty_claim_without_flush()', 'execute'),
    'a private helper of claim_runs'
);

select * from finish();
rollback;
