-- _check_body: a message body, an output body or a prompt is at most 1 MB.
--
-- Guarantees: 22023 when p_body is larger than 1 MiB (1,048,576 bytes in the database
-- encoding); null passes (the caller decides what null means). p_what names the body in
-- the message ('message body', 'output body', 'prompt'); the body itself is never echoed.
-- Every text a run carries to its agent has the same bound: a prompt is read into each of
-- its runs and sent to the model on every step, like a message.
create or replace function runlane._check_body(p_what text, p_body text)
returns void
language plpgsql
immutable
set search_path = pg_catalog, pg_temp
as $$
begin
    if octet_length(p_body) > 1048576 then
        raise exception 'a % is at most 1 MB (1048576 bytes), got % bytes', p_what, octet_length(p_body)
            using errcode = '22023',
                  hint = case
                      when p_what = 'prompt'
                          then 'Keep long instructions elsewhere (a file, a table) and have the agent read them.'
                      else 'Split a larger text into several messages or outputs, '
                          || 'or store it elsewhere and send a reference.'
                  end;
    end if;
end;
$$;

comment on function runlane._check_body(text, text) is
'22023 when a message body, an output body or a prompt is over 1 MB (1048576 bytes).';

revoke all on function runlane._check_body(text, text) from public;
