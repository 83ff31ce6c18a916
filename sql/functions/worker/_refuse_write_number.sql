-- _refuse_write_number: the refusal of a worker write whose sequence number does not fit
-- what the run has applied.
--
-- Raises, always, 22023 with COLUMN write_seq (a client tells this refusal from other
-- 22023s by that field, never by the text), naming the run, the fence, the number given
-- and the number expected:
-- * a number above the last applied one + 1 (runlane._require_owner): it skips ahead;
-- * p_end not null: the number was applied already, but not as this end of the attempt
--   (p_end: finish, retry, release), since the run is still running under p_fence or,
--   for a finish, did not end: another write took the number, so the end is refused
--   instead of answered as applied.
-- Nothing is written by the write refused (the caller's transaction rolls back).
create or replace function runlane._refuse_write_number(
    p_run runlane.runs, p_fence bigint, p_seq bigint, p_end text default null
)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_last bigint := coalesce(case when (p_run).write_fence = p_fence then (p_run).write_seq end, 0);
begin
    if p_end is null then
        raise exception 'write number % skips ahead: run % under fence % has applied writes 1 to %, so the next is %',
            p_seq, (p_run).run_id, p_fence, v_last, v_last + 1
            using errcode = '22023', schema = 'runlane', table = 'runs', column = 'write_seq',
                  hint = 'Number an attempt''s writes 1, 2, 3, … in the order they are sent; '
                      || 'a refused write leaves its number to the next one.';
    end if;
    raise exception 'write number % of run % was applied, but not as its %: the run is % (writes 1 to % applied, the next is %)',
        p_seq, (p_run).run_id, p_end, (p_run).state, v_last, v_last + 1
        using errcode = '22023', schema = 'runlane', table = 'runs', column = 'write_seq',
              hint = 'Another write of this attempt was sent with that number; '
                  || 'the run did not end, and its lease decides what happens to it.';
end;
$$;

comment on function runlane._refuse_write_number(runlane.runs, bigint, bigint, text) is
'Raises 22023 (COLUMN write_seq) for a write number that skips ahead, or an end (p_end) '
'whose number another write took.';

revoke all on function runlane._refuse_write_number(runlane.runs, bigint, bigint, text) from public;
