-- save_checkpoint: persists the agent's resumable state for this run.
--
-- Guarantees:
-- * Fenced (runlane._require_owner): RL001 when fenced out or no longer running, RL008
--   for an unknown run; a fenced-out worker never overwrites the new owner's state.
-- * Replaces runs.checkpoint with p_checkpoint (NULL clears it). A run that goes back
--   to the queue (release, lease expiry) resumes from it with its next claim.
create or replace function runlane.save_checkpoint(p_run_id bigint, p_fence bigint, p_checkpoint jsonb)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    perform runlane._require_owner(p_run_id, p_fence);

    update runlane.runs as r
    set checkpoint = save_checkpoint.p_checkpoint
    where r.run_id = save_checkpoint.p_run_id;
end;
$$;

comment on function runlane.save_checkpoint(bigint, bigint, jsonb) is
'Stores the run''s checkpoint for its current owner. RL001 fenced out, RL008 unknown run.';

revoke all on function runlane.save_checkpoint(bigint, bigint, jsonb) from public;
grant execute on function runlane.save_checkpoint(bigint, bigint, jsonb) to runlane_worker;
