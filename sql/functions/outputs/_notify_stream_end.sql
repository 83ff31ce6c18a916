-- _notify_stream_end: a hint on channel runlane_outputs that a run has finished, so its
-- followers learn of the end at once instead of on their next poll.
--
-- Guarantees:
-- * Payload {"stream": "<token>", "end": true}: the run's stream token
--   (runlane._stream_token), never its id. A follower that wakes on any hint for its
--   token reads run_status again and finds the run terminal; "end" tells a reader that
--   pages outputs only (the dashboard) to read the run's status now.
-- * Sent by every terminal transition of a started or queued run: runlane._close_run_with
--   (finish, retry with its attempts spent, reaping, a Stop of a queued run, a gated run
--   that started before), runlane._finish_runs_together and runlane._skip_gated_runs.
--   Runs inserted already finished (a skipped run_now, create_run or tick) send none:
--   nobody can follow them before their insert commits.
-- * The array form notifies several runs' streams (a batch of closes), reading the
--   secret and the queue once.
-- * Never the reason a close fails at COMMIT: sent through runlane._notify (nothing from
--   a half-full NOTIFY queue on); followers then see the end on their next poll.
create or replace function runlane._notify_stream_end(p_run_id bigint)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    perform runlane._notify(
        'runlane_outputs',
        json_build_object('stream', runlane._stream_token(p_run_id), 'end', true)::text
    );
end;
$$;

comment on function runlane._notify_stream_end(bigint) is
'Publishes {stream: <run''s stream token>, end: true} on runlane_outputs when a run finishes '
'(a hint; unless the notification queue is half full).';

revoke all on function runlane._notify_stream_end(bigint) from public;

create or replace function runlane._notify_stream_end(p_run_ids bigint[])
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if cardinality(p_run_ids) > 0 then
        perform runlane._notify(
            'runlane_outputs',
            array(
                select json_build_object('stream', t.token, 'end', true)::text
                from unnest(runlane._stream_token(p_run_ids)) as t (token)
            )
        );
    end if;
end;
$$;

comment on function runlane._notify_stream_end(bigint[]) is
'_notify_stream_end for several runs at once (the secret and the queue read once).';

revoke all on function runlane._notify_stream_end(bigint[]) from public;
