"""Chat messages accepted on plain PostgreSQL and on Citus with 1, 2 and 4 worker nodes:
what each node and the coordinator spend per message, by the route a call takes.

Every topology runs on this machine: one plain cluster, or a coordinator and N worker
nodes (each a LocalCluster with citus preloaded), the schema distributed by
`runlane migrate --citus`. 64 organizations with an agent each; 4 client threads, each on
a login for every organization, send chat messages, each to a new thread, the
organizations in turn: per message the session names its organization (runlane.org_id)
and calls send_message, in one round trip, then asks run_status of the run. By one of two
routes:

* coordinator: every call to the coordinator, which plans each statement and sends it to
  the node that holds the organization;
* direct: every call to the node runlane.org_node names for the organization, where each
  statement runs on its own shards.

Per topology and route: messages/s, database CPU per message (utime + stime of every
process of a server) of the coordinator and of each worker node per message of the
organizations it holds, the commands Citus sends between servers per message (its
remote-command log over one message per organization) and WAL bytes per message summed
over the servers. On 2 cores the rate cannot grow with nodes; the CPU per message on each
node, and the coordinator's share, are what carry over to N machines.

Then the drain: the chat runs those messages queued, claimed and finished by one
`runlane worker --lane interactive` per worker node (one on plain PostgreSQL), each
connected to its node and claiming that node's organizations. Per topology: runs/s
(first claim to last finish), database CPU per run on each node (of the runs it holds)
and on the coordinator, WAL per run, and the commands one keyed claim of a page sends
between servers (its receipt, a global row, is written on every server).

    python -m bench citus_scale [--quick] [--messages N] [--nodes 1,2,4]
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import psycopg

from bench import _common
from bench.durable_compare import server_cpu_seconds
from runlane.citus import migrate_citus
from runlane.migrate import migrate
from runlane.pgcluster import LocalCluster

ORGS = 64
CLIENTS = 4
DATABASE = "bench_citus"
SETTINGS = {
    **_common.BENCH_SETTINGS,
    "shared_buffers": "128MB",
    "shared_preload_libraries": "citus",
    "max_worker_processes": "16",
}
NAME_ORG = "select set_config('runlane.org_id', %s, false)"
SEND = "select run_id from runlane.send_message(%s, %s, 'hello')"
STATUS = "select state from runlane.run_status(%s)"


def one_message(conn: psycopg.Connection, org: int, thread: str) -> None:
    with conn.pipeline():  # (the org's name and the message: one round trip)
        conn.execute(NAME_ORG, (f"org-{org}",))
        sent = conn.execute(SEND, (f"agent-{org}", thread))
    conn.execute(STATUS, (sent.fetchone()[0],))


def start_topology(workers: int) -> list[LocalCluster]:
    """[server] for plain PostgreSQL (workers == 0), else [coordinator, worker, ...] with
    the citus extension in DATABASE and the workers added."""
    settings = _common.BENCH_SETTINGS if workers == 0 else SETTINGS
    servers = [LocalCluster(settings=settings) for _ in range(1 + workers)]
    for server in servers:
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"create database {DATABASE}")
        if workers:
            with psycopg.connect(server.dsn_for(DATABASE), autocommit=True) as conn:
                conn.execute("create extension citus")
    if workers:
        with psycopg.connect(servers[0].dsn_for(DATABASE), autocommit=True) as conn:
            conn.execute("select citus_set_coordinator_host('127.0.0.1', %s)", (servers[0].port,))
            for server in servers[1:]:
                conn.execute("select citus_add_node('127.0.0.1', %s)", (server.port,))
    return servers


def prepare(servers: list[LocalCluster]) -> dict[str, str]:
    """Migrates (distributes on Citus) and seeds; returns each organization's direct DSN."""
    front = servers[0].dsn_for(DATABASE)
    by_port = {server.port: server.dsn_for(DATABASE) for server in servers}
    with psycopg.connect(front, autocommit=True) as conn:
        if len(servers) == 1:
            migrate(conn)
        else:
            migrate_citus(conn)
        homes = {}
        for i in range(ORGS):
            org = f"org-{i}"
            conn.execute("select runlane.put_org(%s)", (org,))
            conn.execute("select runlane.put_user(%s, %s)", (f"user-{i}", org))
            conn.execute(
                "select runlane.put_agent(%s, jsonb_build_object("
                "'org_id', %s::text, 'owner_id', %s::text, 'model', 'echo'))",
                (f"agent-{i}", org, f"user-{i}"),
            )
            node = conn.execute("select port from runlane.org_node(%s)", (org,)).fetchone()
            homes[org] = by_port[node[0]] if node else front
    return homes


def send(dsn_of, messages: int, tag: str) -> float:
    """CLIENTS threads send `messages` in all; dsn_of(org) names where each call goes.
    Returns the seconds taken."""
    errors: list[BaseException] = []

    def client(index: int) -> None:
        conns: dict[str, psycopg.Connection] = {}
        try:
            for n in range(index, messages, CLIENTS):
                org = n % ORGS
                dsn = dsn_of(f"org-{org}")
                conn = conns.get(dsn) or conns.setdefault(
                    dsn, psycopg.connect(dsn, autocommit=True)
                )
                one_message(conn, org, f"{tag}-{n}")
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)
        finally:
            for conn in conns.values():
                conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def commands_between_servers(dsn_of, tag: str) -> float:
    """Commands Citus sends from the server a call reaches to others, per message (one
    message per organization, its remote-command log)."""
    notices: list[str] = []
    for org in range(ORGS):
        with psycopg.connect(dsn_of(f"org-{org}"), autocommit=True) as conn:
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            conn.execute("set citus.log_remote_commands = on")
            one_message(conn, org, f"{tag}-{org}")
    return sum(n.startswith("issuing") for n in notices) / ORGS


def wal_lsn(server: LocalCluster) -> int:
    with psycopg.connect(server.dsn_for(DATABASE), autocommit=True) as conn:
        return conn.execute("select pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0]


def cpu_figures(servers, cpu: list[float], held: dict[str, int], count: int, unit: str) -> dict:
    """CPU in ms per `unit`: the plain server's over all `count`; on Citus the
    coordinator's over all, and each node's over the ones it holds (`held`, by DSN)."""
    if len(servers) == 1:
        return {f"cpu_ms_per_{unit}": round(cpu[0] / count * 1000, 3)}
    return {
        f"coordinator_cpu_ms_per_{unit}": round(cpu[0] / count * 1000, 3),
        f"node_cpu_ms_per_{unit}_held": [
            round(c / held[s.dsn_for(DATABASE)] * 1000, 3) if held[s.dsn_for(DATABASE)] else None
            for s, c in zip(servers[1:], cpu[1:], strict=True)
        ],
    }


def measure(servers, homes, route: str, messages: int) -> dict:
    front = servers[0].dsn_for(DATABASE)

    def dsn_of(org: str) -> str:
        return front if route == "coordinator" else homes[org]

    send(dsn_of, min(messages, 200), f"warm-{route}")  # plans, caches, connections
    cpu = [server_cpu_seconds(s) for s in servers]
    wal = [wal_lsn(s) for s in servers]
    seconds = send(dsn_of, messages, route)
    cpu = [server_cpu_seconds(s) - before for s, before in zip(servers, cpu, strict=True)]
    wal = sum(wal_lsn(s) - before for s, before in zip(servers, wal, strict=True))
    held = {s.dsn_for(DATABASE): 0 for s in servers}
    for n in range(messages):
        held[homes[f"org-{n % ORGS}"]] += 1
    result = {
        "route": route,
        "messages": messages,
        "messages_per_s": round(messages / seconds),
        "wal_bytes_per_message": round(wal / messages),
    }
    result |= cpu_figures(servers, cpu, held, messages, "message")
    if len(servers) == 1:
        return result
    result["commands_between_servers_per_message"] = round(
        commands_between_servers(dsn_of, f"count-{route}"), 1
    )
    return result


def unfinished(front: str) -> int:
    with psycopg.connect(front, autocommit=True) as conn:
        return conn.execute(
            "select count(*) from runlane.runs where state in ('queued', 'running')"
        ).fetchone()[0]


def drain(servers: list[LocalCluster], homes: dict[str, str]) -> dict:
    """Every queued chat run claimed and finished by one worker per node (the plain
    server's one); CPU, WAL and the rate over the drain."""
    front = servers[0].dsn_for(DATABASE)
    nodes = servers if len(servers) == 1 else servers[1:]
    with psycopg.connect(front, autocommit=True) as conn:
        queued = dict(
            conn.execute(
                "select org_id, count(*) from runlane.runs where state = 'queued' group by org_id"
            ).fetchall()
        )
    held = {s.dsn_for(DATABASE): 0 for s in servers}
    for org, count in queued.items():
        held[homes[org]] += count
    cpu = [server_cpu_seconds(s) for s in servers]
    wal = [wal_lsn(s) for s in servers]
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "runlane", "worker", "--dsn", node.dsn_for(DATABASE),
             "--lane", "interactive", "--agent", "runlane.agents.echo:agent",
             "--no-maintenance", "--scan-interval", "0.2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for node in nodes
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while unfinished(front) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)
    cpu = [server_cpu_seconds(s) - before for s, before in zip(servers, cpu, strict=True)]
    wal = sum(wal_lsn(s) - before for s, before in zip(servers, wal, strict=True))
    runs = sum(queued.values())
    with psycopg.connect(front, autocommit=True) as conn:
        left, seconds = conn.execute(
            "select count(*) filter (where state <> 'succeeded'), "
            "extract(epoch from max(finished_at) - min(first_started_at))::float "
            "from runlane.runs"
        ).fetchone()
    result = {
        "drained_runs": runs,
        "runs_left": left,
        "runs_per_s": round(runs / seconds) if seconds else None,
        "wal_bytes_per_run": round(wal / runs),
    }
    result |= cpu_figures(servers, cpu, held, runs, "run")
    if len(servers) == 1:
        return result
    result["commands_between_servers_per_claim"] = claim_commands(servers, homes)
    return result


def claim_commands(servers: list[LocalCluster], homes: dict[str, str]) -> dict:
    """The commands one claim of a page (10 runs of the first node's organizations) sends
    to other servers: unkeyed, and keyed (its receipt written on every server)."""
    node = servers[1].dsn_for(DATABASE)
    mine = [org for org, dsn in homes.items() if dsn == node][:10]
    counts = {}
    for kind in ("unkeyed", "keyed"):
        with psycopg.connect(node, autocommit=True) as conn:
            for n, org in enumerate(mine):
                conn.execute(NAME_ORG, (org,))
                conn.execute(SEND, (f"agent-{org.split('-')[1]}", f"probe-{kind}-{n}"))
            conn.execute(NAME_ORG, ("",))
            notices: list[str] = []
            conn.add_notice_handler(lambda d, kept=notices: kept.append(d.message_primary or ""))
            conn.execute("set citus.log_remote_commands = on")
            claimed = conn.execute(
                "select run_id from runlane.claim_runs('probe', array['interactive'], 10, "
                "interval '1 minute', %s, false, null)",
                (uuid.uuid4() if kind == "keyed" else None,),
            ).fetchall()
            counts[kind] = {
                "runs": len(claimed),
                "remote_commands": sum(n.startswith("issuing") for n in notices),
            }
    return counts


def main(argv=None) -> list[str]:
    ap = argparse.ArgumentParser(
        prog="python -m bench citus_scale", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="600 messages, 1 and 2 nodes")
    ap.add_argument("--messages", type=int, help="messages per topology and route (3000)")
    ap.add_argument("--nodes", help="worker node counts, comma-separated (1,2,4)")
    args = ap.parse_args(argv)
    messages = args.messages or (600 if args.quick else 3000)
    counts = [
        int(n) for n in re.split(r"\s*,\s*", args.nodes or ("1,2" if args.quick else "1,2,4"))
    ]
    rows = []
    for workers in [0, *counts]:
        servers = start_topology(workers)
        try:
            homes = prepare(servers)
            routes = ["plain"] if workers == 0 else ["coordinator", "direct"]
            for route in routes:
                row = {"worker_nodes": workers, **measure(servers, homes, route, messages)}
                rows.append(row)
                print(row, flush=True)
            row = {"worker_nodes": workers, "route": "drain", **drain(servers, homes)}
            rows.append(row)
            print(row, flush=True)
        finally:
            for server in servers:
                server.destroy()
    path = _common.write_result("citus_scale", {"machine": _common.machine(), "rows": rows})
    print(f"written to {path}")
    return [
        f"{r['worker_nodes']} nodes, drain: {r['runs_per_s']} runs/s, "
        f"coordinator {r.get('coordinator_cpu_ms_per_run', '-')} ms, "
        f"nodes {r.get('node_cpu_ms_per_run_held', r.get('cpu_ms_per_run'))} ms per run"
        if r["route"] == "drain"
        else f"{r['worker_nodes']} nodes, {r['route']}: {r['messages_per_s']} messages/s, "
        f"coordinator {r.get('coordinator_cpu_ms_per_message', '-')} ms, "
        f"nodes {r.get('node_cpu_ms_per_message_held', r.get('cpu_ms_per_message'))} ms per message"
        for r in rows
    ]


if __name__ == "__main__":
    main()
