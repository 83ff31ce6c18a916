-- put_agent keeps next_run_at right through the agents_schedule trigger: set with a
-- schedule and an open gate, cleared when switched off, locked, or left without a model,
-- set again when the gate reopens.
begin;
select plan(8);

do $$ begin perform runlane.put_org('org-n'); perform runlane.put_user('owner-n', 'org-n'); end $$;

select ok(
    (runlane.put_agent('agent-n', '{"org_id": "org-n", "owner_id": "owner-n", "model": "m",
                                     "schedule": "every 3 hours"}')).next_run_at
    between now() + interval '3 hours' - interval '1 second' and now() + interval '3 hours',
    'a schedule and an open gate set next_run_at one interval ahead'
);
select is((runlane.put_agent('agent-n', '{"enabled": false}')).next_run_at, null, 'switched off: cleared');
select isnt((runlane.put_agent('agent-n', '{"enabled": true}')).next_run_at, null, 'switched on: set');
select is((runlane.put_agent('agent-n', '{"admin_locked": true}')).next_run_at, null, 'locked: cleared');
select isnt((runlane.put_agent('agent-n', '{"admin_locked": false}')).next_run_at, null, 'unlocked: set');
select is((runlane.put_agent('agent-n', '{"model": null}')).next_run_at, null, 'no model: cleared');
select isnt((runlane.put_agent('agent-n', '{"model": "m2"}')).next_run_at, null, 'a model again: set');
select is((runlane.put_agent('agent-n', '{"schedule": ""}')).next_run_at, null, 'manual only: cleared');

select * from finish();
rollback;
