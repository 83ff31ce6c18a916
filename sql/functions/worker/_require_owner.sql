-- _require_owner: the fence check every worker write goes through.
--
-- Returns the run row locked (for no key update, so a concurrent claim waits for the
-- write to commit) when the caller still owns it: the run is running and its fence is
-- the caller's. Raises RL008 for an unknown run and RL001 when the caller was fenced
-- out (a newer claim exists) or the run is no longer running.
create or replace function runlane._require_owner(p_run_id bigint, p_fence bigint)
returns runlane.runs
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_run runlane.runs;
begin
    if p_run_id is null or p_fence is null then
        raise exception 'run id and fence are required'
            using errcode = '22004';
    end if;

    select r.* into v_run
    from runlane.runs as r
    where r.run_id = _require_owner.p_run_id
    for no key update;

    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008';
    end if;

    if v_run.fence <> p_fence or v_run.state <> 'running' then
        raise exception 'lease lost: run % is % with fence %, the caller holds fence %',
            p_run_id, v_run.state, v_run.fence, p_fence
            using errcode = 'RL001',
                  hint = 'Another worker owns this run now; stop working on it and write nothing more.';
    end if;

    return v_run;
end;
$$;

comment on function runlane._require_owner(bigint, bigint) is
'Fence check for worker writes: the locked run row, or RL001 (fenced out) / RL008 (unknown run).';

revoke all on function runlane._require_owner(bigint, bigint) from public;
