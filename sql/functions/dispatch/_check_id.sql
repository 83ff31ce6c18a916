-- _check_id: an identifier a caller passes (agent, thread, worker) is a real name.
--
-- Guarantees: 22004 for null; 22023 for an id that is empty or made only of whitespace
-- or invisible characters (ASCII and Unicode: tabs, U+00A0, U+2000-U+200B, U+3000, …,
-- and control characters), and for an id longer than 256 characters (ids are indexed:
-- a longer one would fail deep in an index insert with 54000). p_what names the id in
-- the message ('thread id'); the id itself is never echoed whole.
create or replace function runlane._check_id(p_what text, p_id text)
returns void
language plpgsql
immutable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_id is null then
        raise exception 'a % is required', p_what
            using errcode = '22004';
    end if;
    if length(p_id) > 256 then
        raise exception 'a % is at most 256 characters, got %', p_what, length(p_id)
            using errcode = '22023',
                  hint = 'Ids are short names: 1 to 256 characters, not only whitespace.';
    end if;
    if p_id ~ '^[[:space:][:cntrl:]\u0085\u00a0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u3000\ufeff]*$' then
        raise exception 'a % cannot be empty or only whitespace, got %', p_what,
            runlane._quote_for_error(p_id)
            using errcode = '22023',
                  hint = 'Ids are short names: 1 to 256 characters, not only whitespace.';
    end if;
end;
$$;

comment on function runlane._check_id(text, text) is
'22004 null id; 22023 an id that is blank (Unicode whitespace included) or over 256 characters.';

revoke all on function runlane._check_id(text, text) from public;
