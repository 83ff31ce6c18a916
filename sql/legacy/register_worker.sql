-- register_worker (queue generation, last release): the worker announces itself in the
-- registry that the contract step reads (runlane.workers, from 0002): generation 1,
-- legacy deliveries. Parameters: worker_id, host, pid.
insert into runlane.workers as w (worker_id, generation, deliveries, lanes, host, pid)
values (%(worker_id)s, 1, 'legacy', '{interactive,background}', %(host)s, %(pid)s)
on conflict (worker_id) do update
    set
        generation = 1,
        deliveries = 'legacy',
        lanes = excluded.lanes,
        host = excluded.host,
        pid = excluded.pid,
        started_at = now(),
        heartbeat_at = now(),
        stopped_at = null
returning w.worker_id
