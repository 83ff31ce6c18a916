-- _require_owner: the fence check every worker write goes through.
--
-- Returns the run row locked (for no key update, so a concurrent claim waits for the
-- write to commit) when the caller still owns it: the run is running, its fence is the
-- caller's and, for a computer-bound run, it still holds its computer. Raises RL008 for
-- an unknown run and RL001 when the caller was fenced out (a newer claim exists), the
-- run is no longer running, or the run lost its computer.
--
-- Holding the computer: the computer_leases row of the run's computer names this run
-- and this fence. Its expiry does not matter: a run whose computer lease expired is
-- still the owner until another run's claim replaces the row (heartbeat renews it then).
-- A missing row is a lost computer too: only the run itself (finish, release, retry),
-- reap_stale (for runs it reaps or that are no longer running) and a later owner
-- (after taking the row over once it expired) delete rows, so a running run without its
-- row had it taken and given back by another run. The row is locked FOR SHARE until
-- commit (one primary-key lookup): a claim taking the computer over waits for this write
-- to commit, so no write is ever accepted from a run that did not hold its computer at
-- that moment.
--
-- The run is read by its id and organization (runlane._run_org_for_write): on Citus one
-- node's row; the callers name v_run.org_id in their statements for the same reason.
--
-- The three-argument form (p_seq, the caller's per-attempt write sequence number) is for
-- writes that may be resent after a lost reply: when the run's write_fence is p_fence and
-- its write_seq >= p_seq, the write was already applied, and the row is returned locked
-- WITHOUT the ownership check (the run may have been finished by that very write); the
-- caller tells the case with runlane._write_applied and answers without applying it
-- again. A number above the last applied one + 1 (the attempt's first write is 1) skips
-- ahead: once ownership is checked it is refused with 22023 (runlane._refuse_write_number),
-- nothing written, so a number sent far ahead cannot turn the owner's later writes into
-- resends.
-- Otherwise, once ownership is checked, it records the write as applied (runs.
-- write_fence = p_fence, write_seq = p_seq; migration 0004) and returns the row as it
-- was before (so runlane._write_applied still reads false on it): the caller's write
-- commits or rolls back with that record. A null p_seq is
-- the two-argument form and touches no 0004 column.
--
-- The four-argument form with p_record false checks the same, in the same order, but
-- leaves the record to the caller, who writes write_fence and write_seq in the update
-- of the run it makes anyway (finish_runs, through runlane._close_run_with's p_write_seq:
-- one update of the run per finish, not two). A caller that passes false must record
-- the write in the same transaction, or a resend of it is applied twice.
create or replace function runlane._require_owner(
    p_run_id bigint, p_fence bigint, p_seq bigint, p_record boolean
)
returns runlane.runs
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_run runlane.runs;
    v_org text;  -- runlane._run_org_for_write: NULL on plain PostgreSQL
begin
    if p_run_id is null or p_fence is null then
        raise exception 'run id and fence are required'
            using errcode = '22004';
    end if;
    if p_seq is not null and p_seq < 1 then
        raise exception 'write sequence number % is out of range', p_seq
            using errcode = '22023',
                  hint = 'Number each attempt''s writes 1, 2, 3, … and resend a write with its number.';
    end if;

    v_org := runlane._run_org_for_write(p_run_id);
    select r.* into v_run
    from runlane.runs as r
    where r.run_id = _require_owner.p_run_id
      and (v_org is null or r.org_id = v_org)
    for no key update;

    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008';
    end if;

    -- GUARD: a resend of a write already applied under this fence is answered, not refused.
    if p_seq is not null and runlane._write_applied(v_run, p_fence, p_seq) then
        return v_run;
    end if;

    if v_run.fence <> p_fence or v_run.state <> 'running' then
        raise exception 'lease lost: run % is % with fence %, the caller holds fence %',
            p_run_id, v_run.state, v_run.fence, p_fence
            using errcode = 'RL001',
                  hint = 'Another worker owns this run now; stop working on it and write nothing more.';
    end if;

    -- GUARD: a computer-bound run writes only while it holds its computer.
    if v_run.computer_id is not null then
        perform 1
        from runlane.computer_leases as cl
        where cl.computer_id = v_run.computer_id
          and cl.run_id = v_run.run_id
          and cl.fence = v_run.fence
        for share;
        if not found then
            raise exception 'lease lost: run % no longer holds computer %', p_run_id, v_run.computer_id
                using errcode = 'RL001',
                      hint = 'Another run took this computer over after the lease expired; '
                          || 'stop working on this run and write nothing more.';
        end if;
    end if;

    -- GUARD: a number above the last applied one + 1 skips ahead: refused, nothing written.
    -- (Nested: an unnumbered write on a schema before 0004, which has no write_fence
    -- column, never reads it.)
    if p_seq is not null then
        if p_seq > coalesce(case when v_run.write_fence = p_fence then v_run.write_seq end, 0) + 1 then
            perform runlane._refuse_write_number(v_run, p_fence, p_seq);
        end if;
    end if;

    -- A sequenced write is recorded as applied here, in the write's own transaction (a
    -- rolled-back write leaves no record). The write functions touch no sequence column,
    -- so their unsequenced forms need no migration beyond 0002.
    if p_seq is not null and p_record then
        update runlane.runs as r
        set write_fence = _require_owner.p_fence, write_seq = _require_owner.p_seq
        where r.run_id = v_run.run_id and r.org_id = v_run.org_id;
    end if;

    return v_run;
end;
$$;

comment on function runlane._require_owner(bigint, bigint, bigint, boolean) is
'Fence check for worker writes: the locked run row, or RL001 (fenced out, not running, '
'computer lost) / RL008 (unknown run) / 22023 (p_seq skips ahead); a resend of an applied '
'write (p_seq) is returned unchecked; p_record false leaves recording the write '
'(write_fence, write_seq) to the caller.';

revoke all on function runlane._require_owner(bigint, bigint, bigint, boolean) from public;

create or replace function runlane._require_owner(p_run_id bigint, p_fence bigint, p_seq bigint)
returns runlane.runs
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    return runlane._require_owner(p_run_id, p_fence, p_seq, true);
end;
$$;

comment on function runlane._require_owner(bigint, bigint, bigint) is
'Fence check for worker writes: the locked run row, or RL001 (fenced out, not running, '
'computer lost) / RL008 (unknown run); a resend of an applied write (p_seq) is returned unchecked.';

revoke all on function runlane._require_owner(bigint, bigint, bigint) from public;

create or replace function runlane._require_owner(p_run_id bigint, p_fence bigint)
returns runlane.runs
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    return runlane._require_owner(p_run_id, p_fence, null, false);
end;
$$;

comment on function runlane._require_owner(bigint, bigint) is
'Fence check for worker writes: the locked run row, or RL001 (fenced out, not running, '
'computer lost) / RL008 (unknown run).';

revoke all on function runlane._require_owner(bigint, bigint) from public;
