-- _check_patch: a put_* patch names only accepted keys, each with a value of its type.
--
-- Guarantees: 22004 for a NULL patch; 22023 for a patch that is not a JSON object, for a
-- key not in p_types (the message names the key and lists the accepted ones), and for a
-- value whose JSON type is not one p_types allows for its key (naming the key, the type
-- given and the types accepted). p_types maps each accepted key to an array of JSON type
-- names ("string", "number", "boolean", "null"); p_what names the patch ("agent").
-- Keys are quoted through runlane._quote_for_error: a hostile key is never echoed whole.
create or replace function runlane._check_patch(p_what text, p_patch jsonb, p_types jsonb)
returns void
language plpgsql
immutable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_accepted text := (select string_agg(k, ', ' order by k) from jsonb_object_keys(p_types) as k);
    v_key text;
    v_value jsonb;
begin
    if p_patch is null then
        raise exception 'an % patch is required (use ''{}'' to change nothing)', p_what
            using errcode = '22004';
    end if;
    if jsonb_typeof(p_patch) <> 'object' then
        raise exception 'an % patch must be a JSON object, got %', p_what, jsonb_typeof(p_patch)
            using errcode = '22023',
                  hint = 'Accepted keys: ' || v_accepted || '.';
    end if;
    for v_key, v_value in select e.key, e.value from jsonb_each(p_patch) as e loop
        if not p_types ? v_key then
            raise exception 'unknown key % in the % patch; accepted keys: %',
                runlane._quote_for_error(v_key), p_what, v_accepted
                using errcode = '22023',
                      hint = 'Accepted keys: ' || v_accepted || '.';
        end if;
        if not (p_types -> v_key) ? jsonb_typeof(v_value) then
            raise exception 'key % of the % patch must be %, got %',
                quote_literal(v_key), p_what,
                (select string_agg(t, ' or ') from jsonb_array_elements_text(p_types -> v_key) as t),
                jsonb_typeof(v_value)
                using errcode = '22023',
                      hint = 'Accepted keys: ' || v_accepted || '.';
        end if;
    end loop;
end;
$$;

comment on function runlane._check_patch(text, jsonb, jsonb) is
'22004 null patch; 22023 not an object, an unknown key or a value of the wrong JSON type '
'(naming the key and the accepted keys).';

revoke all on function runlane._check_patch(text, jsonb, jsonb) from public;
