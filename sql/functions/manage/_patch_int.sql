-- _patch_int: a whole-number value of a put_* patch, within [p_min, 2147483647].
--
-- Guarantees: returns the value as int; 22023 naming the key when the JSON number has a
-- fraction or lies outside the range (the JSON type itself is checked by _check_patch).
create or replace function runlane._patch_int(p_key text, p_value jsonb, p_min int)
returns int
language plpgsql
immutable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_number numeric := (p_value #>> '{}')::numeric;
begin
    if v_number <> trunc(v_number) or v_number < p_min or v_number > 2147483647 then
        raise exception 'key % must be a whole number from % to 2147483647, got %',
            quote_literal(p_key), p_min, runlane._quote_for_error(v_number::text)
            using errcode = '22023';
    end if;
    return v_number::int;
end;
$$;

comment on function runlane._patch_int(text, jsonb, int) is
'A patch value as int: 22023 naming the key for a fraction or a value out of range.';

revoke all on function runlane._patch_int(text, jsonb, int) from public;
