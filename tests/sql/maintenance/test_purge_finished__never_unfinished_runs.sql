-- purge_finished never deletes a run that has not finished (queued or running), however
-- old it is, nor any of its rows; a finished run another transaction holds is skipped.
begin;
select plan(4);

do $$
declare
    v_queued bigint;
    v_running bigint;
begin
    perform runlane_test.agent('agent-busy', 'org-busy');
    perform runlane_test.agent('agent-slow', 'org-busy');
    v_queued := runlane_test.queued_run('agent-busy', 'interactive', 'interactive');
    v_running := runlane_test.queued_run('agent-slow', 'background', 'manual');
    perform runlane_test.claimed(v_running);
    insert into runlane.run_outputs (org_id, run_id, attempt, kind, body)
    values ('org-busy', v_running, 1, 'text', 'partial');
    insert into runlane.run_events (org_id, run_id, event) values ('org-busy', v_queued, 'run.created');
    -- created long ago, and a finished_at stamped by mistake: still not finished
    update runlane.runs
    set created_at = now() - interval '90 days', finished_at = now() - interval '90 days'
    where run_id in (v_queued, v_running);
end
$$;

select is(runlane.purge_finished(interval '8 days'), 0, 'nothing finished: nothing purged');
select results_eq(
    'select state from runlane.runs order by run_id',
    $$values ('queued'::text), ('running'::text)$$,
    'the queued and the running run are both still there'
);
select is(
    (select count(*) from runlane.run_outputs) + (select count(*) from runlane.run_events),
    2::bigint,
    'their output and journal rows are kept'
);
select is(runlane.purge_finished(interval '8 days', 10000), 0, 'nor with the largest batch');

select * from finish();
rollback;
