-- _is_timezone: true when p_timezone names a zone of the time zone database
-- (pg_timezone_names), such as 'UTC' or 'Europe/Berlin'. Abbreviations ('CEST'), POSIX
-- strings ('UTC+3') and unknown names are refused. Used by next_slot and the write triggers of
-- users and platform_settings (reading pg_timezone_names costs a few milliseconds, so a
-- cheap parse attempt rejects garbage first and 'UTC' is answered without a lookup).
--
-- Also refused, though the server's zone directory lists them: names that are no place's
-- zone. `localtime` is whatever zone the database host is set to (it changes with the
-- host), `posixrules` is the template for POSIX TZ strings, `Factory` is "no local time
-- set"; `posix/…` and `right/…` are copies of the whole database (the same zones, and
-- `right/` counts leap seconds, which civil time does not). The plain name of a
-- `posix/` zone is accepted.
create or replace function runlane._is_timezone(p_timezone text)
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_timezone is null or length(p_timezone) > 64 then
        return false;
    end if;
    if p_timezone = 'UTC' then
        return true;
    end if;
    if p_timezone in ('localtime', 'posixrules', 'Factory')
       or p_timezone like 'posix/%' or p_timezone like 'right/%' then
        return false;
    end if;
    begin
        perform now() at time zone p_timezone;
    exception when invalid_parameter_value then
        return false;
    end;
    return exists (select 1 from pg_catalog.pg_timezone_names as z where z.name = p_timezone);
end;
$$;

comment on function runlane._is_timezone(text) is
'True when the text is a zone name of pg_timezone_names (not an abbreviation or POSIX string, '
'nor localtime, posixrules, Factory or a posix/ or right/ copy).';

revoke all on function runlane._is_timezone(text) from public;
