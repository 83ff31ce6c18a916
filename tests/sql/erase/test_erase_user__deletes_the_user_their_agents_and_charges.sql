-- erase_user deletes the user with every agent they own (and all it holds) and their
-- charges and spend buckets, and nothing of another user; 55006 while a run of theirs is
-- unfinished, with nothing deleted; afterwards the user answers as one that never existed.
begin;
select plan(11);

do $$
begin
    perform runlane_test.agent('agent-1-eu', 'org-eus', null, 'user-gone-eu');
    perform runlane_test.agent('agent-2-eu', 'org-eus', null, 'user-gone-eu');
    perform runlane_test.agent('agent-3-eu', 'org-eus', null, 'user-kept-eu');
    update runlane.users set timezone = 'Asia/Tokyo' where user_id = 'user-gone-eu';
    perform runlane_test.chat_turn('agent-1-eu', 'thread-1', 'hidden words one', 2);
    perform runlane_test.chat_turn('agent-2-eu', 'thread-1', 'hidden words two', 3);
    perform runlane_test.chat_turn('agent-3-eu', 'thread-1', 'kept words', 4);
end
$$;

create temporary table spend_before on commit drop as
select runlane.weekly_spend('user-kept-eu') as spend;

do $$ begin perform runlane_test.claimed(runlane_test.queued_run('agent-2-eu', 'interactive', 'interactive')); end $$;
select throws_ok(
    $$select runlane.erase_user('user-gone-eu')$$, '55006',
    format(
        'user ''user-gone-eu'' has an unfinished run (run %s, running)',
        (select r.run_id from runlane.runs as r where r.state = 'running')
    ),
    'not while a run of one of their agents is unfinished'
);
select is(
    (select count(*) from runlane.agents as a where a.owner_id = 'user-gone-eu'), 2::bigint, 'nothing was deleted'
);
update runlane.runs set state = 'failed', finished_at = now() where state = 'running';

select is(runlane.erase_user('user-gone-eu'), 3, 'returns the runs erased across their agents');
select is(runlane_test.rows_mentioning('user-gone-eu'), '{}', 'no row of any table names the user (charges included)');
select is(runlane_test.rows_mentioning('agent-1-eu'), '{}', 'nor their first agent');
select is(runlane_test.rows_mentioning('agent-2-eu'), '{}', 'nor their second agent');
select is(runlane_test.rows_mentioning('hidden'), '{}', 'nor any of their text');
select is(runlane.weekly_spend('user-kept-eu'), (select s.spend from spend_before as s), 'another user''s spend is unchanged');
select is(
    runlane_test.rows_mentioning('kept words'), array['messages: 1', 'run_outputs: 1'], 'another user''s agent is untouched'
);
select throws_ok(
    $$select runlane.weekly_spend('user-gone-eu')$$, '22023', 'unknown owner ''user-gone-eu''',
    'weekly_spend answers as for an unknown owner'
);
select throws_ok(
    $$select runlane.erase_user('user-gone-eu')$$, 'RL008', 'unknown user ''user-gone-eu''',
    'erasing again answers as for an unknown user'
);

select * from finish();
rollback;
