-- save_checkpoint: persists the agent's resumable state for this run.
--
-- Guarantees:
-- * Refused with RL001 once the run was stopped (runlane.cancel_run; runlane._refuse_stopped).
-- * Fenced (runlane._require_owner): RL001 when fenced out or no longer running, RL008
--   for an unknown run; a fenced-out worker never overwrites the new owner's state.
-- * Replaces runs.checkpoint with p_checkpoint (NULL clears it). A run that goes back
--   to the queue (release, lease expiry) resumes from it with its next claim.
-- * Resends (p_seq, as runlane.append_output): a resend of an applied write changes
--   nothing (a later checkpoint is never overwritten by an old one).
create or replace function runlane.save_checkpoint(
    p_run_id bigint, p_fence bigint, p_checkpoint jsonb, p_seq bigint
)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
begin
    v_run := runlane._require_owner(p_run_id, p_fence, p_seq);
    if p_seq is not null and runlane._write_applied(v_run, p_fence, p_seq) then
        return;  -- a resend: applied once already
    end if;
    perform runlane._refuse_stopped(v_run);  -- GUARD: nothing more after a Stop

    update runlane.runs as r
    set checkpoint = save_checkpoint.p_checkpoint
    where r.run_id = v_run.run_id and r.org_id = v_run.org_id;
end;
$$;

comment on function runlane.save_checkpoint(bigint, bigint, jsonb, bigint) is
'Stores the run''s checkpoint for its current owner. RL001 fenced out, RL008 unknown run. '
'A resend of an applied p_seq changes nothing.';

revoke all on function runlane.save_checkpoint(bigint, bigint, jsonb, bigint) from public;
grant execute on function runlane.save_checkpoint(bigint, bigint, jsonb, bigint) to runlane_worker;

-- The contract form: no write sequence number (never deduplicated).
create or replace function runlane.save_checkpoint(p_run_id bigint, p_fence bigint, p_checkpoint jsonb)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    perform runlane.save_checkpoint(p_run_id, p_fence, p_checkpoint, null);
end;
$$;

comment on function runlane.save_checkpoint(bigint, bigint, jsonb) is
'Stores the run''s checkpoint for its current owner. RL001 fenced out, RL008 unknown run.';

revoke all on function runlane.save_checkpoint(bigint, bigint, jsonb) from public;
grant execute on function runlane.save_checkpoint(bigint, bigint, jsonb) to runlane_worker;
