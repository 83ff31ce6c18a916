-- charge: the owner of a run records spend the moment it is made.
--
-- Guarantees: the amount is checked first (runlane._require_amount: null 22004; NaN,
-- infinite, negative or over 1e12 22023), then ownership (runlane._require_owner: RL008
-- unknown run, RL001 once fenced out, no longer running or off its computer); on any
-- refusal nothing is written. A positive amount is committed with the caller's
-- transaction as one ledger row (runlane._record_charge: counted by weekly_spend in the
-- week it was made, whatever becomes of the attempt or the run) and added to runs.cost in
-- the same transaction. Zero writes nothing. Returns runs.cost, the run's total over all
-- its attempts.
--
-- Resends (p_seq, the attempt's write sequence number, as runlane.append_output): a
-- charge resent after its reply was lost, with the number it was applied under, records
-- nothing more and returns the run's total: a lost acknowledgement never charges twice.
-- A number above the last applied + 1 is refused with 22023, nothing charged.
create or replace function runlane.charge(
    p_run_id bigint, p_fence bigint, p_amount numeric, p_seq bigint
)
returns numeric
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
    v_total numeric;
begin
    -- GUARD: the amount, before any lock is taken.
    perform runlane._require_amount(p_amount, 'amount');

    -- GUARD: the caller still owns the run (row locked until commit), or this is a resend.
    v_run := runlane._require_owner(p_run_id, p_fence, p_seq);
    if p_seq is not null and runlane._write_applied(v_run, p_fence, p_seq) then
        return v_run.cost;  -- a resend: charged once already
    end if;
    if p_amount = 0 then
        return v_run.cost;
    end if;

    perform runlane._record_charge(v_run, p_amount);
    update runlane.runs as r
    set cost = r.cost + charge.p_amount
    where r.run_id = v_run.run_id and r.org_id = v_run.org_id
    returning r.cost into v_total;
    return v_total;
end;
$$;

comment on function runlane.charge(bigint, bigint, numeric, bigint) is
'Records spend of an owned run at once (RL001 when fenced out; 22004/22023 for a bad amount); '
'returns the run''s total cost. A resend of an applied p_seq records nothing more.';

revoke all on function runlane.charge(bigint, bigint, numeric, bigint) from public;
grant execute on function runlane.charge(bigint, bigint, numeric, bigint) to runlane_worker;

-- The contract form: no write sequence number (never deduplicated).
create or replace function runlane.charge(p_run_id bigint, p_fence bigint, p_amount numeric)
returns numeric
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    return runlane.charge(p_run_id, p_fence, p_amount, null);
end;
$$;

comment on function runlane.charge(bigint, bigint, numeric) is
'Records spend of an owned run at once (RL001 when fenced out; 22004/22023 for a bad amount); '
'returns the run''s total cost.';

revoke all on function runlane.charge(bigint, bigint, numeric) from public;
grant execute on function runlane.charge(bigint, bigint, numeric) to runlane_worker;
