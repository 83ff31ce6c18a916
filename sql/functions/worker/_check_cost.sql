-- _check_cost: a cost a worker charges is a real amount.
--
-- Guarantees: 22004 for null; 22023 for NaN, an infinity, a negative amount or one over
-- 1e12 (one finish charging more than a trillion is a bug, and one NaN in runs.cost
-- would poison every later weekly_spend of its owner: NaN + x = NaN).
create or replace function runlane._check_cost(p_cost numeric)
returns void
language plpgsql
immutable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_cost is null then
        raise exception 'a cost is required'
            using errcode = '22004';
    end if;
    -- NaN sorts above every number, so the upper bound catches it with the infinities.
    if p_cost = 'NaN'::numeric or p_cost < 0 or p_cost > 1e12 then
        raise exception 'cost % is not a charge', p_cost
            using errcode = '22023',
                  hint = 'Charge the cost of the work done: a finite amount from 0 to 1e12.';
    end if;
end;
$$;

comment on function runlane._check_cost(numeric) is
'22004 null cost; 22023 a cost that is NaN, infinite, negative or over 1e12.';

revoke all on function runlane._check_cost(numeric) from public;
