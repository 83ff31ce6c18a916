-- _stream_token: the unguessable token that names a run's output stream on runlane_outputs.
--
-- Guarantees:
-- * Any login may LISTEN on any channel, so notifications carry this token instead of
--   the run id: 32 hex digits derived from the run id and a secret only the schema owner
--   can read (runlane.stream_keys, made by migration 0007), stable for the run's life.
--   Whoever can read the run gets it from runlane.stream_token; a stranger learns
--   nothing from it (no run id, no organization, no order).
-- * NULL before migration 0007 (no secret yet): readers then page on every hint.
create or replace function runlane._stream_token(p_run_id bigint)
returns text
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_secret text;
begin
    if to_regclass('runlane.stream_keys') is null then
        return null;  -- GUARD: schema older than 0007
    end if;
    select k.secret into v_secret from runlane.stream_keys as k;
    -- secret on both sides of the id: no length extension of a known token
    return left(encode(sha256(convert_to(v_secret || ':' || p_run_id || ':' || v_secret, 'UTF8')), 'hex'), 32);
end;
$$;

comment on function runlane._stream_token(bigint) is
'The run''s stream token (runlane_outputs payloads): a keyed hash of the run id, never the id.';

revoke all on function runlane._stream_token(bigint) from public;

-- The array form: the tokens of p_run_ids, in order, the secret read once (a batch of
-- closes notifies every stream at the cost of one). The same formula as above.
create or replace function runlane._stream_token(p_run_ids bigint[])
returns text[]
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_secret text;
begin
    if to_regclass('runlane.stream_keys') is null then
        return array(select null::text from unnest(p_run_ids));  -- GUARD: schema older than 0007
    end if;
    select k.secret into v_secret from runlane.stream_keys as k;
    return array(
        select left(encode(sha256(convert_to(v_secret || ':' || r.run_id || ':' || v_secret, 'UTF8')), 'hex'), 32)
        from unnest(p_run_ids) with ordinality as r (run_id, position)
        order by r.position
    );
end;
$$;

comment on function runlane._stream_token(bigint[]) is
'The stream tokens of several runs, in order (as runlane._stream_token(bigint) each).';

revoke all on function runlane._stream_token(bigint[]) from public;
