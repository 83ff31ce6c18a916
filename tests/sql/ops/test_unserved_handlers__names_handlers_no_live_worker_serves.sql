-- unserved_handlers names each (handler, lane) with queued runs that no live worker
-- serves: a worker serves the handlers it registered in the lanes it registered; one
-- that registered no handlers (as runlane 0.2 workers do) serves any; a stopped worker, or one
-- silent for 2 minutes, serves none.
begin;
select plan(6);

do $$
begin
    perform runlane_test.agent('agent-r', 'org-a');
    perform runlane_test.agent('agent-c', 'org-a');
    update runlane.agents set handler = 'research' where agent_id = 'agent-r';
    update runlane.agents set handler = 'chat' where agent_id = 'agent-c';
    perform runlane.submit_message('agent-r', 'thread-1', 'look it up');
    perform runlane.submit_message('agent-r', 'thread-2', 'and this');
    perform runlane.submit_message('agent-c', 'thread-3', 'hello');
    perform runlane.register_worker('w-chat', '{interactive}', false, '{chat}');
    perform runlane.register_worker('w-research-bg', '{background}', false, '{research}');
    perform runlane.register_worker('w-research-gone', '{interactive}', true, '{research}');
    perform runlane.register_worker('w-research-silent', '{interactive}', false, '{research}');
    update runlane.workers set heartbeat_at = now() - interval '3 minutes'
    where worker_id = 'w-research-silent';
end
$$;

select results_eq(
    $$ select handler, lane, queued from runlane.unserved_handlers() $$,
    $$ values ('research'::text, 'interactive'::text, 2) $$,
    'research has 2 queued chat runs and no live worker of its lane serves it'
);
select ok(
    (select u.oldest_wait_ms >= 0 from runlane.unserved_handlers() as u),
    'with how long its oldest awake run has waited'
);

do $$ begin perform runlane.register_worker('w-any', '{background}', false, null); end $$;
select is(
    (select count(*) from runlane.unserved_handlers()), 1::bigint,
    'a worker of any handler in the other lane serves none of it'
);

do $$ begin perform runlane.register_worker('w-old', '{interactive}'); end $$;
select is(
    (select count(*) from runlane.unserved_handlers()), 0::bigint,
    'a worker that registered no handlers (as runlane 0.2 workers do) serves any'
);
select is(
    (select w.handlers from runlane.workers as w where w.worker_id = 'w-old'), null::text[],
    'the earlier register_worker shape records no handlers'
);
select throws_ok(
    $$ select runlane.register_worker('w-bad', '{interactive}', false, '{"Not A Name"}') $$,
    '22023',
    null,
    'a malformed handler name is refused'
);

select * from finish();
rollback;
