-- append_output: persists one output of a run and stamps its first visible response.
--
-- Guarantees:
-- * Refused with RL001 once the run was stopped (runlane.cancel_run; runlane._refuse_stopped).
-- * Fenced (runlane._require_owner): RL001 when fenced out or no longer running, RL008
--   for an unknown run. 22023 for an unknown kind, 22004 for a null kind or body.
-- * Kinds: text, final, message_tool, card are visible (they count as a response);
--   reasoning, placeholder, progress, metadata are not.
-- * The row carries attempt = the run's current attempts.
-- * The FIRST visible output sets runs.first_response_at = clock_timestamp() in this
--   same transaction; it is never reset by later attempts, restarts or resumes. Only
--   then the function returns the run.first_response timing row (run_timing plus
--   "event"); otherwise NULL.
-- * Notifies runlane_outputs with the run's stream token (never its id or the text) at
--   commit, through runlane._notify_output.
-- * Neither the notification nor the timing computation can fail the write: each is
--   guarded by its own exception block (timing NULL, notification skipped), and
--   _notify_output queues nothing once the notification queue is half full, so the
--   notification cannot fail the COMMIT either (see its header).
-- * Resends (p_seq, the attempt's write sequence number; the four-argument form passes
--   none): the write is recorded as the run's last applied one (write_fence, write_seq);
--   a resend of an applied write (its reply was lost) writes nothing, even once the run
--   has finished (runlane._require_owner, runlane._write_applied), and returns NULL, or,
--   for a visible output of the attempt that wrote the run's first visible output, the
--   run.first_response row again (runlane._resent_first_response: the lost reply may
--   have carried it); a number above the last applied + 1 is refused with 22023,
--   nothing written.
create or replace function runlane.append_output(
    p_run_id bigint, p_fence bigint, p_kind text, p_body text, p_seq bigint
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
    v_output_id bigint;
    v_visible boolean;
    v_timing jsonb;
    v_first_response_at timestamptz;
begin
    -- GUARD: arguments, then ownership.
    if p_kind is null or p_body is null then
        raise exception 'an output needs a kind and a body'
            using errcode = '22004';
    end if;
    perform runlane._check_body('output body', p_body);
    v_visible := case
        when p_kind in ('text', 'final', 'message_tool', 'card') then true
        when p_kind in ('reasoning', 'placeholder', 'progress', 'metadata') then false
    end;
    if v_visible is null then
        raise exception 'unknown output kind %', runlane._quote_for_error(p_kind)
            using errcode = '22023',
                  hint = 'Visible: text, final, message_tool, card. '
                      || 'Not visible: reasoning, placeholder, progress, metadata.';
    end if;

    v_run := runlane._require_owner(p_run_id, p_fence, p_seq);
    if p_seq is not null and runlane._write_applied(v_run, p_fence, p_seq) then
        -- A resend: applied once already. Its lost reply may have carried the first response.
        if v_visible then
            return runlane._resent_first_response(v_run, p_fence);
        end if;
        return null;
    end if;
    perform runlane._refuse_stopped(v_run);  -- GUARD: nothing more after a Stop

    select o.output_id into v_output_id
    from runlane._write_run_outputs(
        array[v_run.run_id], array[v_run.org_id], array[v_run.attempts], array[p_kind], array[p_body]
    ) as o;

    -- GUARD: the first visible output stamps the first response, once for the run's life.
    if v_visible and v_run.first_response_at is null then
        v_first_response_at := clock_timestamp();  -- (Citus: no volatile call in the update)
        update runlane.runs as r
        set first_response_at = v_first_response_at
        where r.run_id = v_run.run_id and r.org_id = v_run.org_id and r.first_response_at is null;

        begin
            v_timing := runlane._timing_row(v_run.run_id, 'run.first_response');
        exception when others then
            v_timing := null;
        end;
    end if;

    begin
        perform runlane._notify_output(v_run.run_id, v_output_id);
    exception when others then
        null;  -- a hint only: chat clients page with outputs_since after a reconnect
    end;

    return v_timing;
end;
$$;

comment on function runlane.append_output(bigint, bigint, text, text, bigint) is
'Persists an output for the run''s current owner; the first visible one sets first_response_at '
'and returns the run.first_response timing row (else NULL). Notifies runlane_outputs '
'{run_id, output_id}. RL001 fenced out, RL008 unknown run, 22023 unknown kind. '
'A resend of an applied p_seq writes nothing; it returns the run.first_response row when '
'its attempt wrote the first visible output, else NULL.';

revoke all on function runlane.append_output(bigint, bigint, text, text, bigint) from public;
grant execute on function runlane.append_output(bigint, bigint, text, text, bigint) to runlane_worker;

-- The contract form: no write sequence number (never deduplicated).
create or replace function runlane.append_output(p_run_id bigint, p_fence bigint, p_kind text, p_body text)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    return runlane.append_output(p_run_id, p_fence, p_kind, p_body, null);
end;
$$;

comment on function runlane.append_output(bigint, bigint, text, text) is
'Persists an output for the run''s current owner; the first visible one sets first_response_at '
'and returns the run.first_response timing row (else NULL). Notifies runlane_outputs '
'{stream: token}. RL001 fenced out, RL008 unknown run, 22023 unknown kind.';

revoke all on function runlane.append_output(bigint, bigint, text, text) from public;
grant execute on function runlane.append_output(bigint, bigint, text, text) to runlane_worker;
