-- _ms_between: whole milliseconds from one timestamp to another, rounded, or NULL when
-- either is missing (so a timing key built from it is absent, never zero).
create or replace function runlane._ms_between(p_from timestamptz, p_to timestamptz)
returns bigint
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select round(extract(epoch from (p_to - p_from)) * 1000)::bigint;
$$;

comment on function runlane._ms_between(timestamptz, timestamptz) is
'Milliseconds from p_from to p_to (bigint, rounded); NULL when either is NULL.';

revoke all on function runlane._ms_between(timestamptz, timestamptz) from public;
