-- _max_per_org: the per-worker organization bound of this session's claims, or NULL.
--
-- Guarantees: reads the session setting runlane.max_per_org (`runlane worker
-- --max-per-org N` sets it on its claim connections; any client may `set
-- runlane.max_per_org = N`). Unset, empty or 0: NULL, no bound. A whole number from 1 to
-- 1000000: that number. Anything else: 22023 naming the setting, so a typo never silently
-- lifts the bound.
create or replace function runlane._max_per_org()
returns int
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_setting text := btrim(coalesce(current_setting('runlane.max_per_org', true), ''));
begin
    if v_setting in ('', '0') then
        return null;
    end if;
    if v_setting !~ '^[0-9]{1,7}$' or v_setting::int > 1000000 then
        raise exception 'runlane.max_per_org must be a whole number from 0 (no bound) to 1000000, got %',
            quote_literal(left(v_setting, 40))
            using errcode = '22023';
    end if;
    return v_setting::int;
end;
$$;

comment on function runlane._max_per_org() is
'The runlane.max_per_org session setting as a bound (NULL when unset or 0); 22023 when malformed.';

revoke all on function runlane._max_per_org() from public;
