-- submit_message: a thread id is 1..256 characters and not only whitespace (Unicode
-- whitespace included: tabs, U+3000, U+00A0), a body is at most 1 MB, each refused with
-- 22023 and nothing written; an unknown agent id is quoted at most 64 characters long.
begin;
select plan(10);

do $$ begin perform runlane_test.agent('agent-s', 'org-s'); end $$;

select throws_ok(
    $$select * from runlane.submit_message('agent-s', E'\t\t', 'hi')$$,
    '22023', null, 'a thread id of tabs is refused'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-s', U&'\3000\3000', 'hi')$$,
    '22023', null, 'a thread id of ideographic spaces (U+3000) is refused'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-s', U&'\00A0 \2003', 'hi')$$,
    '22023', null, 'a thread id of no-break and em spaces is refused'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-s', repeat('t', 257), 'hi')$$,
    '22023', null, 'a thread id of 257 characters is refused'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-s', 'thread-1', repeat('b', 1048577))$$,
    '22023', null, 'a body over 1 MB is refused'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-s', 'thread-1', repeat(U&'\00E9', 524289))$$,
    '22023', null, 'the limit counts bytes: 524289 two-byte characters are over 1 MB'
);
select is(
    runlane_test.row_count('messages'), 0::bigint,
    'nothing refused was written'
);
select is(
    (select disposition from runlane.submit_message('agent-s', U&'thread \3000 1', repeat('b', 1048576))),
    'created',
    'a body of exactly 1 MB and a thread id with inner spaces are accepted'
);

create function pg_temp.error_message(p_sql text) returns text
language plpgsql as $$
declare
    v_message text;
begin
    execute p_sql;
    return null;
exception when others then
    get stacked diagnostics v_message = message_text;
    return v_message;
end;
$$;
select cmp_ok(
    length(pg_temp.error_message(format(
        'select * from runlane.submit_message(%L, %L, %L)', repeat('x', 100000), 'thread-1', 'hi'
    ))),
    '<', 200,
    'a huge agent id is not echoed whole into the error'
);
select cmp_ok(
    length(pg_temp.error_message(format(
        'select runlane.run_now(%L)', repeat('x', 100000)
    ))),
    '<', 200,
    'nor by run_now'
);

select * from finish();
rollback;
