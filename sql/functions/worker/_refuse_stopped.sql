-- _refuse_stopped: the Stop fence of a running run's writes.
--
-- Guarantees: raises RL001 when the run p_run (as locked by runlane._require_owner) was
-- asked to stop (runlane.cancel_run: state running, reason 'cancel_requested'), so that
-- nothing more is written for it (outputs, checkpoints, taken steering messages); the
-- worker that sees RL001 stops the agent and finishes the run, which then closes as
-- canceled (finish_run, retry_run, release_run, reap_stale). Charges are not fenced by
-- it: spend already incurred is counted. Returns nothing otherwise.
create or replace function runlane._refuse_stopped(p_run runlane.runs)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if (p_run).reason = 'cancel_requested' then
        raise exception 'run % was stopped (cancel_run): it writes nothing more', (p_run).run_id
            using errcode = 'RL001',
                  hint = 'Stop the agent and finish the run; it closes as canceled.';
    end if;
end;
$$;

comment on function runlane._refuse_stopped(runlane.runs) is
'RL001 when the run was asked to stop (cancel_run): no output, checkpoint or steering take after a Stop.';

revoke all on function runlane._refuse_stopped(runlane.runs) from public;
