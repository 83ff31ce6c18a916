-- agent_last_runs: each agent's newest run, skipped ones included; agents without runs absent.
begin;
select plan(1);

do $$ begin
    perform runlane_test.agent('agent-lr1', 'org-lr');
    perform runlane_test.agent('agent-lr2', 'org-lr');
    perform runlane_test.agent('agent-lr-none', 'org-lr');
    perform runlane_test.timed_run('agent-lr1', 'interactive', 'interactive', 'succeeded', '2026-03-02 10:00+00', 10, 20, 30);
    perform runlane_test.timed_run('agent-lr1', 'background', 'scheduled', 'skipped', '2026-03-02 11:00+00',
                                   p_reason => 'already_running');
    perform runlane_test.timed_run('agent-lr1', 'interactive', 'interactive', 'failed', '2026-03-02 09:00+00', 10, null, 30);
    perform runlane_test.timed_run('agent-lr2', 'interactive', 'manual', 'running', '2026-03-02 08:00+00', 10);
end $$;

select is(
    (
        select array_agg(row(agent_id, created_at, lane, trigger, state, reason)::text)
        from runlane.agent_last_runs() where agent_id like 'agent-lr%'
    ),
    array[
        row('agent-lr1', '2026-03-02 11:00+00'::timestamptz, 'background', 'scheduled', 'skipped', 'already_running')::text,
        row('agent-lr2', '2026-03-02 08:00+00'::timestamptz, 'interactive', 'manual', 'running', null)::text
    ],
    'the newest run of each agent with runs (a skipped one too); an agent without runs is not listed'
);

select * from finish();
rollback;
