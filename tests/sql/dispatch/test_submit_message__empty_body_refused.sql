-- submit_message: an empty body, or one of whitespace only (Unicode whitespace and
-- invisible characters included), is refused with 22023 naming the body, and nothing is
-- written; in the keyed form the key is not kept, so a retry with a body succeeds.
begin;
select plan(7);

do $$ begin perform runlane_test.agent('agent-e', 'org-e'); end $$;

select throws_ok(
    $$select * from runlane.submit_message('agent-e', 'thread-1', '')$$,
    '22023', 'a message needs a body (p_body), got an empty or whitespace-only one',
    'an empty body is refused with 22023 naming the body'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-e', 'thread-1', E' \t\n\r ')$$,
    '22023', null, 'a body of ASCII whitespace is refused'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-e', 'thread-1', U&'\3000\00A0\200B')$$,
    '22023', null, 'a body of Unicode spaces and a zero-width space is refused'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-e', 'thread-1', '', 'key-1')$$,
    '22023', null, 'the keyed form refuses it too'
);
select is(
    array[
        runlane_test.row_count('messages'),
        runlane_test.row_count('runs'),
        runlane_test.row_count('idempotency_keys')
    ],
    array[0, 0, 0]::bigint[],
    'nothing refused was written, the key included'
);
select is(
    (select disposition from runlane.submit_message('agent-e', 'thread-1', 'hi', 'key-1')),
    'created',
    'a retry with the key and a body is accepted'
);
select is(
    (select disposition from runlane.submit_message('agent-e', 'thread-2', ' . ')),
    'created',
    'a body with one visible character among spaces is accepted'
);

select * from finish();
rollback;
