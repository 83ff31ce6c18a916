-- notify_queue_holders: the backends most likely holding the server's NOTIFY queue back,
-- named in the warning that the queue is filling (the maintenance leader's
-- notify.queue_usage) and callable from any language.
--
-- What it can know: every backend of the cluster (pg_stat_activity, every database), its
-- pid, login, application_name, database, state, wait event and how long its current
-- transaction has been open. Rows: at most p_limit backends other than the caller's own,
-- those idle in a transaction first (a LISTENing session parked in BEGIN is the usual
-- holder), then those blocked writing to a client that does not read (wait_event
-- ClientWrite: notifications pile up behind a full socket), then every other open
-- transaction; oldest transaction first within each group. No query text is returned.
--
-- What it cannot know: which backend is furthest behind in the queue. PostgreSQL keeps
-- each listener's queue position in shared memory and does not expose it, nor which
-- sessions LISTEN (pg_listening_channels() answers for the caller's own session only).
-- The server log says it once the queue is half full ("NOTIFY queue is N% full" with
-- "The server process with PID n is among those with the oldest transactions"). So these
-- rows are suspects, not proof: the holder is a LISTENing session that has not read
-- notifications since its transaction (or its stalled client read) began, and a backend
-- that never LISTENed can hold no queue. Ending the first suspect and reading
-- notify_queue_usage() again shows whether it was the one.
--
-- Sees other logins' state, wait event and transaction start only when its owner may
-- (a superuser or a member of pg_read_all_stats; the schema owner runs it, security
-- definer); otherwise those columns are NULL for them and such backends are listed last,
-- as unknowns.
create or replace function runlane.notify_queue_holders(p_limit int default 3)
returns table (
    pid int,
    login text,
    application text,
    database text,
    state text,
    wait_event text,
    xact_started timestamptz,
    xact_age_s double precision
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_limit is null or p_limit < 1 or p_limit > 100 then
        raise exception 'notify_queue_holders needs a limit between 1 and 100, not %', p_limit
            using errcode = '22023';
    end if;

    return query
    select
        a.pid,
        a.usename::text,
        a.application_name,
        a.datname::text,
        a.state,
        a.wait_event,
        a.xact_start,
        extract(epoch from clock_timestamp() - a.xact_start)::double precision
    from pg_catalog.pg_stat_activity as a
    where a.backend_type = 'client backend'
      and a.pid <> pg_catalog.pg_backend_pid()
      and (a.xact_start is not null or a.wait_event = 'ClientWrite' or a.state is null)
    order by
        case
            when a.state like 'idle in transaction%' then 0
            when a.wait_event = 'ClientWrite' then 1
            else 2
        end,
        a.xact_start nulls last,
        a.pid
    limit p_limit;
end;
$$;

comment on function runlane.notify_queue_holders(int) is
'Backends most likely holding the NOTIFY queue back: idle in transaction first, oldest first.';

revoke all on function runlane.notify_queue_holders(int) from public;
grant execute on function runlane.notify_queue_holders(int) to runlane_worker;
