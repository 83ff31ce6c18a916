-- _commit_empty_claim_without_flush: lets a claim that took nothing commit without waiting
-- for its WAL flush, on a session whose claims are transactions of their own.
--
-- Guarantees:
-- * Acts only when the session says each of its claims is a transaction of its own:
--   runlane.autocommit_claims = 'on' (`runlane worker` sets it on its claim connections,
--   which run in autocommit). Unset, empty or 'off': nothing changes, and a caller's
--   transaction keeps its durability. Anything else: 22023 naming the setting.
-- * claim_runs calls it only on its exits that claimed no run and skipped none. What such a
--   claim wrote is row locks (its receipt's, its worker's bound row, runs it locked and left
--   queued for a cap or the bound) and, on a worker's first claim, a receipt that records
--   nothing. A crash that loses its commit loses nothing: the locks die with the server, and
--   a resend of its key claims again, as after any empty claim.
-- * Then synchronous_commit is off for the rest of the transaction (set_config, local):
--   the commit returns once its WAL is written; the WAL writer, or the next commit that
--   waits for a flush, flushes it. Nothing committed later depends on it (WAL is flushed in
--   order), so it is never durable after something that followed it.
-- Why: one notification wakes every idle worker of its lane. Those that lose the race for the
-- run still lock their receipt (a resend racing its original must wait for it, see
-- claim_runs), find the run taken and commit; each would wait for a flush of its own: with 8
-- idle workers, 4.7 flushes per chat message against 2.8 with one (bench/wake_hops.py).
create or replace function runlane._commit_empty_claim_without_flush()
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_setting text := coalesce(current_setting('runlane.autocommit_claims', true), '');
begin
    if v_setting = 'on' then
        perform set_config('synchronous_commit', 'off', true);
    elsif v_setting not in ('', 'off') then
        raise exception 'runlane.autocommit_claims must be on or off, got %',
            quote_literal(left(v_setting, 40))
            using errcode = '22023';
    end if;
end;
$$;

comment on function runlane._commit_empty_claim_without_flush() is
'On a session with runlane.autocommit_claims = on: the empty claim in progress commits '
'without waiting for its WAL flush.';

revoke all on function runlane._commit_empty_claim_without_flush() from public;
