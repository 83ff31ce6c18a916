-- _write_applied: was the write numbered p_seq under p_fence already applied to p_run?
--
-- True when p_seq is given and the run's last applied sequenced write (write_fence,
-- write_seq, set in the same transaction as each sequenced write) was made under p_fence
-- with a number at or above p_seq: a caller resending after a lost reply. A worker
-- numbers its writes in the order it sends them, one sender per attempt, so a number
-- not above the last applied one is a resend, never a new write.
create or replace function runlane._write_applied(p_run runlane.runs, p_fence bigint, p_seq bigint)
returns boolean
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select p_seq is not null
        and coalesce((p_run).write_fence = p_fence and (p_run).write_seq >= p_seq, false);
$$;

comment on function runlane._write_applied(runlane.runs, bigint, bigint) is
'True when the sequenced write (p_fence, p_seq) was already applied to the run: a resend.';

revoke all on function runlane._write_applied(runlane.runs, bigint, bigint) from public;
