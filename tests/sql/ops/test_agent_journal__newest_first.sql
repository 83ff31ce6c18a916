-- agent_journal: runs and skips with reasons, newest first, coalesced ticks counted.
begin;
select plan(5);

do $$ begin perform runlane_test.agent('agent-j', 'org-j'); end $$;
do $$ begin perform runlane_test.timed_runs('2026-03-02 12:00+00', 'agent-j'); end $$;
do $$ begin perform runlane_test.agent('agent-k', 'org-j'); end $$;
do $$ begin perform runlane_test.timed_run('agent-k', 'background', 'manual', 'queued', '2026-03-02 11:59+00'); end $$;

select is(
    (select array_agg(row(trigger, state, reason)::text) from runlane.agent_journal('agent-j', 3)),
    array[
        row('interactive', 'running', null)::text,
        row('manual', 'skipped', 'already_running')::text,
        row('scheduled', 'failed', 'iteration_cap')::text
    ],
    'newest first, limited, with skips and their reasons; other agents'' runs are not listed'
);
select is(
    (select count(*)::int from runlane.agent_journal('agent-j')),
    6,
    'every run of the agent is listed up to the default limit'
);
select is(
    (
        select row(first_response_ms, total_ms)::text
        from runlane.agent_journal('agent-j') where state = 'succeeded' order by created_at desc limit 1
    ),
    row(300, 1000)::text,
    'first response and total ms as run_timing reports them'
);

-- A timer run that a later tick coalesced into.
insert into runlane.run_events (org_id, run_id, event, detail)
select
    org_id,
    run_id,
    'routine.coalesced' as event,
    '{}'::jsonb as detail
from runlane.runs where agent_id = 'agent-j' and trigger = 'scheduled';
select is(
    (select coalesced from runlane.agent_journal('agent-j') where trigger = 'scheduled'),
    1,
    'the coalesced ticks of a timer run are counted'
);
select throws_ok(
    $$select * from runlane.agent_journal('no-such-agent')$$,
    'RL008', null, 'an unknown agent is refused with RL008'
);

select * from finish();
rollback;
