-- _check_wake_at: a wake time a caller passes is a sensible instant.
--
-- Guarantees: null passes (no wake time: at once). Otherwise 22023 unless the instant is
-- finite and within one year of now(): between now() - 1 year (a past wake time means
-- "at once"; slack for a publisher that is late) and now() + 1 year. A wake time further
-- ahead would park a run for ever: every later trigger of its agent is skipped as
-- already_running and every message on its thread joins it.
create or replace function runlane._check_wake_at(p_wake_at timestamptz)
returns void
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_wake_at is null then
        return;
    end if;
    if not isfinite(p_wake_at)
       or p_wake_at > now() + interval '1 year'
       or p_wake_at < now() - interval '1 year' then
        raise exception 'wake time % is out of range', p_wake_at
            using errcode = '22023',
                  hint = 'A wake time is within one year of now (past ones mean at once), '
                      || 'or null for at once.';
    end if;
end;
$$;

comment on function runlane._check_wake_at(timestamptz) is
'22023 unless a wake time is null or a finite instant within one year of now().';

revoke all on function runlane._check_wake_at(timestamptz) from public;
