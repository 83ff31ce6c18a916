-- stream_token: the token a reader of a run matches runlane_outputs notifications with.
--
-- Guarantees: the run's stream token (runlane._stream_token; NULL before migration 0007,
-- when every hint must be treated as possibly this run's). RL008 for an unknown run and,
-- for a login scoped to an organization, for another organization's run (the same
-- message: nothing leaks by existence); 22004 for a NULL run id. Reads only.
create or replace function runlane.stream_token(p_run_id bigint)
returns text
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
begin
    if p_run_id is null then
        raise exception 'run id is required'
            using errcode = '22004';
    end if;
    perform 1
    from runlane.runs as r
    where r.run_id = stream_token.p_run_id
      and (v_scope is null or r.org_id = v_scope);
    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008';
    end if;
    return runlane._stream_token(p_run_id);
end;
$$;

comment on function runlane.stream_token(bigint) is
'The token runlane_outputs notifications of this run carry (instead of its id). RL008 unknown run.';

revoke all on function runlane.stream_token(bigint) from public;
grant execute on function runlane.stream_token(bigint) to runlane_api, runlane_worker;
