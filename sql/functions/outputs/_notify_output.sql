-- _notify_output: a hint on channel runlane_outputs that a run has a new output.
--
-- Guarantees:
-- * Payload {"run_id": …, "output_id": …}: ids only, never the output's text.
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
        json_build_object('run_id', p_run_id, 'output_id', p_output_id)::text
    );
end;
$$;

comment on function runlane._notify_output(bigint, bigint) is
'Publishes {run_id, output_id} on runlane_outputs (a hint; readers page with outputs_since), '
'unless the notification queue is half full, so the notification can never fail a COMMIT.';

revoke all on function runlane._notify_output(bigint, bigint) from public;
