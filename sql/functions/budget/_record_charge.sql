-- _record_charge: writes one charge into the ledger (runlane.charge, and a finish that
-- passes a cost, through runlane._close_run_with).
--
-- Guarantees, for a positive finite p_amount already checked by the caller (the ledger's
-- check constraint refuses anything else) and the run p_run whose row the caller holds:
--   * one runlane.charges row: the run, its organization, the owner its agent has now,
--     the run's attempt, the amount, charged_at = p_at (clock_timestamp() by default);
--   * the owner's runlane.charge_buckets row of p_at's UTC quarter hour grows by the same
--     amount (created when missing, with the run's organization, which is the owner's),
--     so every bucket stays the sum of its charges.
-- It does not touch runs.cost: the caller adds the amount in its own update of the run.
-- Concurrent charges of one owner in one quarter hour queue on that bucket's row until
-- each commits.
create or replace function runlane._record_charge(
    p_run runlane.runs,
    p_amount numeric,
    p_at timestamptz default clock_timestamp()
)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_owner text;
begin
    select a.owner_id into strict v_owner
    from runlane.agents as a
    where a.agent_id = (_record_charge.p_run).agent_id
      and a.org_id = (_record_charge.p_run).org_id;

    insert into runlane.charges (run_id, org_id, owner_id, attempt, amount, charged_at)
    values ((p_run).run_id, (p_run).org_id, v_owner, (p_run).attempts, p_amount, p_at);

    if runlane._rows_name_their_org() then
        insert into runlane.charge_buckets as b (owner_id, bucket_start, amount, org_id)
        values (
            v_owner,
            date_bin('15 minutes', p_at, timestamptz '2000-01-01 00:00:00+00'),
            p_amount,
            (p_run).org_id
        )
        on conflict on constraint charge_buckets_pkey
        do update set amount = b.amount + excluded.amount;
    else  -- (a schema before 0027: buckets name no organization)
        insert into runlane.charge_buckets as b (owner_id, bucket_start, amount)
        values (
            v_owner,
            date_bin('15 minutes', p_at, timestamptz '2000-01-01 00:00:00+00'),
            p_amount
        )
        on conflict on constraint charge_buckets_pkey
        do update set amount = b.amount + excluded.amount;
    end if;
end;
$$;

comment on function runlane._record_charge(runlane.runs, numeric, timestamptz) is
'Ledger row for one charge of a run (owner, organization, attempt, amount, time) and its '
'owner''s quarter-hour bucket; runs.cost is the caller''s.';

revoke all on function runlane._record_charge(runlane.runs, numeric, timestamptz) from public;
