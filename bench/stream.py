"""Chat token path: token -> reader latency and its cost, runlane against two floors.

One throwaway cluster with durable_compare's durable settings (fsync, synchronous_commit
and full_page_writes on; max_connections raised to fit two connections per reader). For
each S (concurrent chat runs):

  runlane  S chat runs (submit_message, then publish_run for all in one commit) on 2 real
           `runlane worker` processes (--lane interactive, bench._stream_agent): each step
           emits a 4-byte token every 50 ms for --seconds (10: 200 tokens) through the
           OpenAI agent's Coalescer and ctx.emit at its default flush settings. One reader
           per run follows it with runlane.stream() (LISTEN + outputs_since), all readers
           in READERS asyncio processes.
  naive    floor on a narrow table of its own: 2 writer processes, 10 connections each,
           each token its own INSERT + pg_notify + commit; one reader per stream LISTENs
           on its stream's channel and selects what is new.
  batched  floor: the same, but each writer commits all its streams' pending tokens every
           50 ms in one transaction (one INSERT, one pg_notify per stream written).

A token's emit time is when the model would send it (stream start + index x 50 ms, wall
clock); latency is the reader's receipt (wall clock, same machine) minus it. Per S and
system: reader p50/p99, database CPU (the postmaster and its children, /proc) per token
and per run, commits (pg_stat_database.xact_commit, the readers' read-only ones
included) and writing commits (transaction ids taken), WAL bytes and rows written
(inserted + updated + deleted) per run, worker (writer) CPU and reader CPU. Capacity:
the largest S measured whose reader p99 stays under 250 ms with every token received (a
floor over it is not run at a larger S; null: under the smallest S measured; a ratio
with a null side is null).
Results: bench/results/stream.json.

    python -m bench stream [--quick] [--streams 50,200,500,1000] [--seconds 10]
                           [--skip-floors] [--output-window SECONDS]

--quick: S = 50 and 200, 5 s. Never a test: it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import multiprocessing
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from bench import _common
from bench.durable_compare import CLUSTER_SETTINGS, Proc, server_cpu_seconds
from runlane.pgcluster import LocalCluster

ROOT = Path(__file__).resolve().parent.parent
AGENTS = 20
WORKERS = 2
WRITER_CONNECTIONS = 10
GAP = 0.05
CAPACITY_P99_MS = 250.0
TEMPLATE = "bench_stream_template"
APP = "bench-stream-reader"

FLOOR_SCHEMA = """
create table floor_tokens (stream int, seq int, body text, primary key (stream, seq));
"""
NAIVE_WRITE = """
with i as (insert into floor_tokens values (%(s)s, %(q)s, %(b)s) returning stream)
select pg_notify('f' || stream, '') from i
"""
BATCH_WRITE = """
with i as (
    insert into floor_tokens select * from unnest(%(s)s::int[], %(q)s::int[], %(b)s::text[])
    returning stream
)
select count(pg_notify('f' || s, '')) from (select distinct stream as s from i) as d
"""
# The statements that ran most often during a runlane round: calls, ms, query.
TOP_STATEMENTS = """
select calls, round(total_exec_time::numeric, 1), regexp_replace(left(query, 160), '\\s+', ' ', 'g')
from pg_stat_statements
where dbid = (select oid from pg_database where datname = current_database())
order by total_exec_time desc
limit 10
"""


# -- readers (child processes) ---------------------------------------------------------------


async def _follow_runlane(dsn: str, run_id: int) -> tuple[int, list[tuple[int, int, float]]]:
    from runlane.stream import stream

    got, chars = [], 0
    async for output in stream(dsn, run_id):
        at = time.time()
        body = output["body"] or ""
        # created_at: the start of the batch that wrote it (its transaction's time)
        got.append((chars // 4, len(body) // 4, at, output["created_at"].timestamp()))
        chars += len(body)
    return run_id, got


async def _follow_floor(dsn: str, s: int, tokens: int) -> tuple[int, list[tuple[int, int, float]]]:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    got, last = [], -1
    try:
        await conn.execute(f"listen f{s}")
        while last < tokens - 1:
            rows = await (
                await conn.execute(
                    "select seq from floor_tokens where stream = %s and seq > %s order by seq",
                    (s, last),
                )
            ).fetchall()
            at = time.time()
            if rows:
                got.append((rows[0][0], len(rows), at))
                last = rows[-1][0]
            if last >= tokens - 1:
                break
            # a notification that came during the select is kept and yielded at once
            async for _ in conn.notifies(timeout=1.0, stop_after=1):
                pass
    finally:
        await conn.close()
    return s, got


def reader_process(dsn: str, mode: str, keys: list[int], tokens: int, out: str) -> None:
    async def run() -> list:
        if mode == "runlane":
            tasks = [_follow_runlane(dsn, k) for k in keys]
        else:
            tasks = [_follow_floor(dsn, k, tokens) for k in keys]
        return await asyncio.gather(*tasks)

    results = asyncio.run(run())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    import json

    Path(out).write_text(json.dumps({"cpu_s": usage.ru_utime + usage.ru_stime, "streams": results}))


# -- floor writers (child processes) ---------------------------------------------------------


def _due(start: float, s: int, i: int) -> float:
    return start + (s % 50) / 1000 + i * GAP


async def _naive_connection(dsn: str, streams: list[int], tokens: int, start: float) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        heap = [(_due(start, s, 0), s, 0) for s in streams]
        heapq.heapify(heap)
        while heap:
            due, s, i = heapq.heappop(heap)
            wait = due - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            await conn.execute(NAIVE_WRITE, {"s": s, "q": i, "b": f"{i:04d}"})
            if i + 1 < tokens:
                heapq.heappush(heap, (_due(start, s, i + 1), s, i + 1))


async def _batched(dsn: str, streams: list[int], tokens: int, start: float) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        sent = dict.fromkeys(streams, 0)
        tick = start
        while any(n < tokens for n in sent.values()):
            tick += GAP
            wait = tick - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            now = time.time()
            s_, q_, b_ = [], [], []
            for s in streams:
                while sent[s] < tokens and _due(start, s, sent[s]) <= now:
                    s_.append(s)
                    q_.append(sent[s])
                    b_.append(f"{sent[s]:04d}")
                    sent[s] += 1
            if s_:
                await conn.execute(BATCH_WRITE, {"s": s_, "q": q_, "b": b_})


def writer_process(dsn: str, mode: str, streams: list[int], tokens: int, start: float) -> None:
    async def run() -> None:
        if mode == "batched":
            await _batched(dsn, streams, tokens, start)
        else:
            parts = [streams[k::WRITER_CONNECTIONS] for k in range(WRITER_CONNECTIONS)]
            await asyncio.gather(*(_naive_connection(dsn, p, tokens, start) for p in parts if p))

    asyncio.run(run())


# -- measurement ------------------------------------------------------------------------------


def scalar(conn: psycopg.Connection, query: str, params: tuple = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def counters(conn: psycopg.Connection) -> dict:
    conn.execute("select pg_stat_clear_snapshot()")
    row = conn.execute(
        """
        select (select xact_commit from pg_stat_database where datname = current_database()),
               pg_current_wal_lsn()::text,
               pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
               (select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)
                from pg_stat_all_tables where schemaname not in ('pg_catalog', 'pg_toast'))
        """
    ).fetchone()
    assert row is not None
    return {"commits": row[0], "lsn": row[1], "xids": row[2], "rows": int(row[3])}


def wal_bytes(conn: psycopg.Connection, a: str, b: str) -> int:
    return int(scalar(conn, "select pg_wal_lsn_diff(%s, %s)", (b, a)))


def wait_readers_ready(conn: psycopg.Connection, n: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    query = "select count(*) from pg_stat_activity where application_name = %s and state = 'idle'"
    while scalar(conn, query, (APP,)) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"readers not connected after {timeout} s")
        time.sleep(0.2)
    time.sleep(1.0)  # the last ones' LISTEN and first page


def start_readers(ctx, dsn: str, mode: str, keys: list[int], tokens: int, tmp: Path):
    count = 1 if len(keys) <= 100 else 2
    procs, outs = [], []
    for k in range(count):
        out = str(tmp / f"{mode}-reader-{k}.json")
        p = ctx.Process(target=reader_process, args=(dsn, mode, keys[k::count], tokens, out))
        p.start()
        procs.append(p)
        outs.append(out)
    return procs, outs


def join_readers(procs, outs, timeout: float) -> tuple[list, float]:
    import json

    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(1.0, deadline - time.monotonic()))
        if p.exitcode != 0:
            for q in procs:
                q.kill()
            raise RuntimeError(f"a reader process failed or hung (exit {p.exitcode})")
    streams, cpu = [], 0.0
    for out in outs:
        data = json.loads(Path(out).read_text())
        streams += data["streams"]
        cpu += data["cpu_s"]
    return streams, cpu


def latencies(streams: list, emit_at) -> tuple[list[float], int, list[float], list[float]]:
    """Every token's emit -> receipt in ms, the tokens received, the first tokens', and
    (runlane: rows carry their batch's start) each token's emit -> its batch's start."""
    ms, received, firsts, queued = [], 0, [], []
    for key, got in streams:
        for first, n, at, *batch in got:
            for k in range(first, first + n):
                ms.append((at - emit_at(key, k)) * 1000)
                if k == 0:
                    firsts.append(ms[-1])
                if batch:
                    queued.append((batch[0] - emit_at(key, k)) * 1000)
            received += n
    return ms, received, firsts, queued


def figures(
    system: str, s: int, tokens: int, ms: list[float], received: int, cost: dict, firsts: list
) -> dict:
    total = s * tokens
    r = {
        "system": system,
        "streams": s,
        "tokens_expected": total,
        "tokens_received": received,
        "reader_p50_ms": round(_common.percentile(ms, 0.5), 1),
        "reader_p99_ms": round(_common.percentile(ms, 0.99), 1),
        "reader_max_ms": round(max(ms), 1) if ms else None,
        "first_token_p50_ms": round(_common.percentile(firsts, 0.5), 1) if firsts else None,
        "first_token_p99_ms": round(_common.percentile(firsts, 0.99), 1) if firsts else None,
        "db_cpu_s": round(cost["db_cpu_s"], 2),
        "db_cpu_us_per_token": round(cost["db_cpu_s"] / total * 1e6, 1),
        "db_cpu_ms_per_run": round(cost["db_cpu_s"] / s * 1000, 2),
        "commits_per_run": round(cost["commits"] / s, 1),
        "write_xids_per_run": round(cost["xids"] / s, 1),
        "wal_bytes_per_run": round(cost["wal"] / s),
        "rows_per_run": round(cost["rows"] / s, 1),
        "writer_cpu_s": round(cost["writer_cpu_s"], 2),
        "reader_cpu_s": round(cost["reader_cpu_s"], 2),
        "wall_s": round(cost["wall_s"], 1),
    }
    r["within_capacity"] = received == total and r["reader_p99_ms"] < CAPACITY_P99_MS
    print(_line(r), flush=True)
    return r


def _line(r: dict) -> str:
    return (
        f"  {r['system']:<8} S={r['streams']:<5} p50 {r['reader_p50_ms']:>8.1f} ms  "
        f"p99 {r['reader_p99_ms']:>8.1f} ms  db {r['db_cpu_us_per_token']:>6.1f} us/token  "
        f"{r['commits_per_run']:>6.1f} commits ({r['write_xids_per_run']:.1f} writing)/run  "
        f"{r['wal_bytes_per_run'] / 1024:>6.1f} KiB WAL/run  {r['rows_per_run']:>6.1f} rows/run  "
        f"writer {r['writer_cpu_s']:.1f} s  "
        f"reader {r['reader_cpu_s']:.1f} s  tokens {r['tokens_received']}/{r['tokens_expected']}"
    )


# -- one measurement per system and S -------------------------------------------------------------


def stream_worker(dsn: str, out_dir: str, seconds: float, window: float | None) -> Proc:
    return Proc(
        [
            sys.executable,
            "-m",
            "runlane",
            "worker",
            "--dsn",
            dsn,
            "--lane",
            "interactive",
            "--agent",
            "bench._stream_agent:agent",
            "--no-maintenance",
            "--worker-id",
            f"bench-{uuid.uuid4().hex[:8]}",
            *(["--output-window", str(window)] if window is not None else []),
        ],
        {
            "RUNLANE_BENCH_STREAM_DIR": out_dir,
            "RUNLANE_BENCH_STREAM_SECONDS": str(seconds),
            "RUNLANE_BENCH_STREAM_GAP": str(GAP),
        },
    )


def wait_listening(procs: list[Proc], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not all("listener.listening" in p.log.read_text() for p in procs):
        for p in procs:
            p.check()
        if time.monotonic() > deadline:
            raise RuntimeError("a runlane worker never started listening")
        time.sleep(0.1)


def runlane_round(
    pg: LocalCluster, ctx, s: int, seconds: float, window: float | None = None
) -> dict:
    name = f"bench_stream_runlane_{s}"
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    tokens = round(seconds / GAP)
    tmp = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    workers = [stream_worker(dsn, str(tmp), seconds, window) for _ in range(WORKERS)]
    readers: list = []
    try:
        wait_listening(workers)
        with psycopg.connect(dsn, autocommit=True) as conn:
            tag = uuid.uuid4().hex
            ids = [
                r[0]
                for r in conn.execute(
                    """
                    select s.run_id
                    from generate_series(1, %(n)s::int) as g,
                         lateral runlane.submit_message(
                             'agent' || (g %% %(agents)s::int + 1), %(tag)s || '-' || g,
                             'bench') as s
                    """,
                    {"n": s, "agents": AGENTS, "tag": tag},
                ).fetchall()
            ]
            rdsn = make_conninfo(dsn, application_name=APP)
            readers, outs = start_readers(ctx, rdsn, "runlane", ids, tokens, tmp)
            wait_readers_ready(conn, s + len(readers))  # a pager each, a listener a process
            conn.execute("select pg_stat_statements_reset()")
            before, cpu0 = counters(conn), server_cpu_seconds(pg)
            wcpu0 = sum(w.cpu_seconds() for w in workers)
            started = time.monotonic()
            conn.execute("select runlane.publish_run(r) from unnest(%s::bigint[]) as r", (ids,))
            streams, reader_cpu = join_readers(readers, outs, seconds + 300)
            wall = time.monotonic() - started
            time.sleep(1.0)  # table statistics are flushed at most once a second
            after, cpu1 = counters(conn), server_cpu_seconds(pg)
            wcpu1 = sum(w.cpu_seconds() for w in workers)
            wal = wal_bytes(conn, before["lsn"], after["lsn"])
            top = [list(r) for r in conn.execute(TOP_STATEMENTS).fetchall()]
    finally:
        for w in workers:
            w.stop()
        for p in readers:
            if p.is_alive():
                p.kill()
    emits = {}
    for f in tmp.glob("*.emit"):
        for line in f.read_text().splitlines():
            run_id, t0, gap, _ = line.split()
            emits[int(run_id)] = (float(t0), float(gap))
    ms, received, firsts, queued = latencies(streams, lambda k, i: emits[k][0] + i * emits[k][1])
    _common.drop_database(pg, name)
    cost = {
        "db_cpu_s": cpu1 - cpu0,
        "commits": after["commits"] - before["commits"],
        "xids": after["xids"] - before["xids"] - 1,
        "wal": wal,
        "rows": after["rows"] - before["rows"],
        "writer_cpu_s": wcpu1 - wcpu0,
        "reader_cpu_s": reader_cpu,
        "wall_s": wall,
    }
    row = figures("runlane", s, tokens, ms, received, cost, firsts)
    row["to_batch_start_p50_ms"] = round(_common.percentile(queued, 0.5), 1)
    row["to_batch_start_p99_ms"] = round(_common.percentile(queued, 0.99), 1)
    print(
        f"           first token p50/p99 {row['first_token_p50_ms']}/"
        f"{row['first_token_p99_ms']} ms;"
        f" emit -> its batch's start p50/p99 {row['to_batch_start_p50_ms']}/"
        f"{row['to_batch_start_p99_ms']} ms",
        flush=True,
    )
    return {**row, "top_statements": top}


def floor_round(pg: LocalCluster, ctx, mode: str, s: int, seconds: float) -> dict:
    name = f"bench_stream_{mode}_{s}"
    dsn = _common.create_database(pg, name)
    tokens = round(seconds / GAP)
    tmp = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    keys = list(range(s))
    readers: list = []
    writers: list = []
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(FLOOR_SCHEMA)
            rdsn = make_conninfo(dsn, application_name=APP)
            readers, outs = start_readers(ctx, rdsn, mode, keys, tokens, tmp)
            wait_readers_ready(conn, s)
            before, cpu0 = counters(conn), server_cpu_seconds(pg)
            start = time.time() + 1.0
            writers = [
                ctx.Process(
                    target=writer_process, args=(dsn, mode, keys[k::WORKERS], tokens, start)
                )
                for k in range(WORKERS)
            ]
            for w in writers:
                w.start()
            started = time.monotonic()
            streams, reader_cpu = join_readers(readers, outs, seconds + 300)
            wall = time.monotonic() - started
            wcpu = 0.0
            for w in writers:
                wcpu += _proc_cpu(w.pid)
                w.join(60)
            time.sleep(1.0)
            after, cpu1 = counters(conn), server_cpu_seconds(pg)
            wal = wal_bytes(conn, before["lsn"], after["lsn"])
    finally:
        for p in [*readers, *writers]:
            if p.is_alive():
                p.kill()
    ms, received, firsts, _ = latencies(streams, lambda k, i: _due(start, k, i))
    _common.drop_database(pg, name)
    cost = {
        "db_cpu_s": cpu1 - cpu0,
        "commits": after["commits"] - before["commits"],
        "xids": after["xids"] - before["xids"] - 1,
        "wal": wal,
        "rows": after["rows"] - before["rows"],
        "writer_cpu_s": wcpu,
        "reader_cpu_s": reader_cpu,
        "wall_s": wall,
    }
    return figures(mode, s, tokens, ms, received, cost, firsts)


def _proc_cpu(pid: int | None) -> float:
    """CPU seconds of a live child process (0 once it is reaped)."""
    import os

    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- main ---------------------------------------------------------------------------------------


def capacity(rounds: list[dict], system: str) -> int | None:
    ok = [r["streams"] for r in rounds if r["system"] == system and r["within_capacity"]]
    return max(ok) if ok else None


def pick(rounds: list[dict], system: str, s: int) -> dict | None:
    return next((r for r in rounds if r["system"] == system and r["streams"] == s), None)


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m bench stream", description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="50,200,500,1000", help="S values (50,200,500,1000)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds each stream lasts (10)")
    ap.add_argument("--quick", action="store_true", help="S = 50 and 200, 5 s")
    ap.add_argument("--skip-floors", action="store_true", help="runlane only")
    ap.add_argument(
        "--output-window", type=float, default=None, help="the workers' --output-window"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.streams, args.seconds = "50,200", 5.0
    args.streams = [int(x) for x in str(args.streams).split(",") if x.strip()]
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    ctx = multiprocessing.get_context("spawn")
    most = max(args.streams)
    settings = {**CLUSTER_SETTINGS, "max_connections": str(2 * most + 150)}
    pg = LocalCluster(settings=settings)
    pg.start()
    rounds: list[dict] = []
    try:
        dsn = _common.migrated_database(pg, TEMPLATE)
        with psycopg.connect(dsn, autocommit=True) as conn:
            _common.seed_agents(conn, agents=AGENTS, orgs=1)
            conn.execute("create extension if not exists pg_stat_statements")
        print(
            f"token -> reader latency, {args.seconds:g} s streams, S = {args.streams}:", flush=True
        )
        for s in args.streams:
            rounds.append(runlane_round(pg, ctx, s, args.seconds, args.output_window))
            for mode in () if args.skip_floors else ("naive", "batched"):
                # a floor over the bound at a smaller S is over it at this one: not run
                if not any(r["system"] == mode and not r["within_capacity"] for r in rounds):
                    rounds.append(floor_round(pg, ctx, mode, s, args.seconds))
        info = _common.machine()
        with _common.admin(pg) as conn:
            info["postgres"] = scalar(conn, "show server_version")
    finally:
        pg.destroy()
    info["settings"] = settings
    caps = {k: capacity(rounds, k) for k in ("runlane", "naive", "batched")}
    ref = 200 if pick(rounds, "runlane", 200) else args.streams[0]
    ours, batched = pick(rounds, "runlane", ref), pick(rounds, "batched", ref)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    result = {
        "commit": commit,
        "machine": info,
        "args": vars(args),
        "capacity_p99_ms": CAPACITY_P99_MS,
        "capacity": caps,
        "capacity_ratio_naive": (
            round(caps["runlane"] / caps["naive"], 2) if caps["runlane"] and caps["naive"] else None
        ),
        "s200_reader_p50_ms": (pick(rounds, "runlane", 200) or {}).get("reader_p50_ms"),
        "s200_reader_p99_ms": (pick(rounds, "runlane", 200) or {}).get("reader_p99_ms"),
        "cpu_per_token_ratio_batched": (
            round(ours["db_cpu_us_per_token"] / batched["db_cpu_us_per_token"], 2)
            if ours and batched and batched["db_cpu_us_per_token"]
            else None
        ),
        "cpu_ratio_at_streams": ref,
        "rounds": rounds,
    }
    _common.write_result("stream", result)
    summary = [
        f"token -> reader, {info['cores']} cores, PostgreSQL {info['postgres']}, durable, "
        f"{args.seconds:g} s streams:",
        *(_line(r) for r in rounds),
        f"  capacity (p99 < {CAPACITY_P99_MS:.0f} ms): {caps}; ratio to naive "
        f"{result['capacity_ratio_naive']}; db CPU/token vs batched at S={ref}: "
        f"{result['cpu_per_token_ratio_batched']}",
    ]
    print(summary[-1])
    return summary


if __name__ == "__main__":
    main()
