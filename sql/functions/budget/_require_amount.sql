-- _require_amount: the one rule for an amount of spend (runlane.charge's amount, a
-- finish's cost).
--
-- Guarantees: returns when p_amount is a finite number, zero or more; else raises,
-- naming the argument p_name: 22004 when it is null, 22023 (with a hint) when it is
-- NaN, plus or minus infinity, negative or over 1e12 (a bug, not spend). Callers check before they write anything.
create or replace function runlane._require_amount(p_amount numeric, p_name text)
returns void
language plpgsql
immutable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_amount is null then
        raise exception '% is required', p_name
            using errcode = '22004',
                  hint = 'Pass the cost of the work done, zero or more.';
    end if;
    -- NaN compares equal to NaN and above every number in PostgreSQL.
    if p_amount = 'NaN'::numeric then
        raise exception '% NaN is not a number', p_name
            using errcode = '22023',
                  hint = 'Charge a finite amount, zero or more.';
    end if;
    if p_amount = 'Infinity'::numeric or p_amount = '-Infinity'::numeric then
        raise exception '% % is not finite', p_name, p_amount
            using errcode = '22023',
                  hint = 'Charge a finite amount, zero or more.';
    end if;
    -- One amount over a trillion is a bug in the caller, not spend.
    if p_amount > 1e12 then
        raise exception '% % is over the largest charge, 1e12', p_name, p_amount
            using errcode = '22023',
                  hint = 'Charge a finite amount from 0 to 1e12.';
    end if;
    if p_amount < 0 then
        raise exception '% % is negative', p_name, p_amount
            using errcode = '22023',
                  hint = 'Charge the cost of the work done, zero or more.';
    end if;
end;
$$;

comment on function runlane._require_amount(numeric, text) is
'Refuses an amount of spend that is null (22004), NaN, infinite, negative or over 1e12 (22023).';

revoke all on function runlane._require_amount(numeric, text) from public;
