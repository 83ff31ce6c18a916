-- _quote_for_error: a caller's text as an error message may quote it.
--
-- Guarantees: at most the first 64 characters, quoted as a literal, followed by the
-- full length when it was cut ("'abc…' (10485760 characters)"); 'null' for null. An
-- error never echoes a huge or hostile argument whole into the client's message or the
-- server log.
create or replace function runlane._quote_for_error(p_text text)
returns text
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select case
        when p_text is null then 'null'
        when length(p_text) <= 64 then quote_literal(p_text)
        else quote_literal(left(p_text, 64) || '…') || ' (' || length(p_text) || ' characters)'
    end;
$$;

comment on function runlane._quote_for_error(text) is
'The first 64 characters of a text, quoted, plus its length when cut: what an error may echo.';

revoke all on function runlane._quote_for_error(text) from public;
