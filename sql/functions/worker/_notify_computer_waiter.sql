-- _notify_computer_waiter: wake the run next in line for a computer that was just freed.
--
-- Guarantees: when p_computer_id is not null, publishes runlane._notify_run for the
-- first awake queued run on that computer in claim order (claim_class, run_id), so it
-- starts at once instead of waiting for the periodic scan. A hint only: delivered at
-- commit, and the scan recovers a miss. Reads the runs_queued_computer_idx index.
create or replace function runlane._notify_computer_waiter(p_computer_id text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_run_id bigint;
    v_lane text;
begin
    if p_computer_id is null then
        return;
    end if;

    select r.run_id, r.lane into v_run_id, v_lane
    from runlane.runs as r
    where r.state = 'queued'
      and r.computer_id = _notify_computer_waiter.p_computer_id
      and (r.wake_at is null or r.wake_at <= now())
    order by r.claim_class, r.run_id
    limit 1;

    if v_run_id is not null then
        perform runlane._notify_run(v_run_id, v_lane);
    end if;
end;
$$;

comment on function runlane._notify_computer_waiter(text) is
'Notifies the first awake queued run waiting on a computer (claim order) after its lease was released.';

revoke all on function runlane._notify_computer_waiter(text) from public;
