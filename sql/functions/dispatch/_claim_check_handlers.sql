-- _claim_check_handlers: names what is wrong with claim_runs' handlers, or returns them
-- deduplicated.
--
-- Guarantees: raises 22023 for an empty list, more than 64 handlers, or a name that is
-- null or not 1-64 characters of a-z 0-9 _ . - (as agents.handler); otherwise returns
-- the handlers each kept once, so that no read returns a run twice. claim_runs calls it
-- only when its one-test check fails.
create or replace function runlane._claim_check_handlers(p_handlers text[])
returns text[]
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if cardinality(p_handlers) = 0 or cardinality(p_handlers) > 64 then
        raise exception 'claim_runs handlers must name 1 to 64 handlers, got %',
            cardinality(p_handlers)
            using errcode = '22023',
                  hint = 'Pass NULL to claim runs of any handler.';
    end if;
    if exists (
        select 1 from unnest(p_handlers) as h (name)
        where h.name is null or h.name !~ '^[a-z0-9_.-]{1,64}$'
    ) then
        raise exception 'claim_runs handlers must be 1-64 characters of a-z 0-9 _ . -, got %',
            runlane._quote_for_error(p_handlers::text)
            using errcode = '22023';
    end if;
    return array(select distinct h.name from unnest(p_handlers) as h (name) order by 1);
end;
$$;

comment on function runlane._claim_check_handlers(text[]) is
'claim_runs'' handler checks: raises 22023 for a malformed list, else returns the handlers '
'each kept once.';

revoke all on function runlane._claim_check_handlers(text[]) from public;
