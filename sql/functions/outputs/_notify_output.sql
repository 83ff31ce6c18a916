-- _notify_output: a hint on channel runlane_outputs that a run has a new output.
--
-- Guarantees:
-- * Payload {"stream": "<token>"}: the run's stream token (runlane._stream_token), never
--   its id, the output's id or text. Any login, runlane grant or not, may LISTEN on any
--   channel: a stranger sees only that some stream got output. A reader of the run gets
--   the token from runlane.stream_token and pages with outputs_since on a match.
-- * Never the reason a write fails at COMMIT: sent through runlane._notify, which queues
--   nothing once the server's NOTIFY queue is half full (a full queue fails the COMMIT
--   with 54000). Readers then find the outputs by paging with outputs_since, as they do
--   after any missed notification.
-- * Callers still call it inside an exception block (append_output): a failure here is
--   swallowed there, and the output row stays.
create or replace function runlane._notify_output(p_run_id bigint, p_output_id bigint)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    perform runlane._notify(
        'runlane_outputs',
        json_build_object('stream', runlane._stream_token(p_run_id))::text
    );
end;
$$;

comment on function runlane._notify_output(bigint, bigint) is
'Publishes {stream: <run''s stream token>} on runlane_outputs (a hint; readers page with outputs_since), '
'unless the notification queue is half full, so the notification can never fail a COMMIT.';

revoke all on function runlane._notify_output(bigint, bigint) from public;
