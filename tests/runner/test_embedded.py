"""Embedded mode: its own PostgreSQL, in-process notifications instead of LISTEN, and the
same recovery scan: a run committed with no notification at all is still started."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from runlane.agents.echo import EchoAgent
from runlane.embedded import Embedded

DEADLINE = 60.0


async def _state(dsn: str, run_id: int) -> str:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute("select state from runlane.runs where run_id = %s", (run_id,))
        return (await cur.fetchone())[0]


async def _execute(dsn: str, sql: str) -> list[tuple]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(sql)
        return await cur.fetchall() if cur.description else []


async def _until_state(dsn: str, run_id: int, state: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while await _state(dsn, run_id) != state:
        assert time.monotonic() < deadline, f"run {run_id} never became {state}"
        await asyncio.sleep(0.05)


SETUP = """
insert into runlane.platform_settings (org_id) values ('org-e');
insert into runlane.users (user_id, org_id) values ('user-e', 'org-e');
insert into runlane.agents (agent_id, org_id, owner_id, model)
values ('agent-e', 'org-e', 'user-e', 'm');
"""


def test_a_run_committed_without_any_notification_is_started_by_the_scan():
    async def scenario() -> None:
        async with Embedded(EchoAgent(chunks=1), scan_interval=0.3, maintenance=None) as rl:
            async with await psycopg.AsyncConnection.connect(rl.dsn, autocommit=True) as conn:
                await conn.execute(SETUP)
                # Committed by another connection: no publish_run, no Worker.notify.
                cur = await conn.execute(
                    "select run_id from runlane.submit_message('agent-e', 't-1', 'unheard')"
                )
                run_id = (await cur.fetchone())[0]
                await _until_state(rl.dsn, run_id, "succeeded")
                cur = await conn.execute(
                    "select count(*) from pg_stat_activity "
                    "where datname = current_database() and query ilike 'listen%%'"
                )
                assert (await cur.fetchone())[0] == 0, "embedded mode must not LISTEN"
            assert rl.worker.passes["interactive"] >= 2  # the startup pass, then a scan

    asyncio.run(scenario())


def test_in_process_notification_starts_a_run_without_waiting_for_the_scan():
    async def scenario() -> None:
        async with Embedded(EchoAgent(chunks=1), scan_interval=600, maintenance=None) as rl:
            await _execute(rl.dsn, SETUP)
            # The startup passes are done before the run exists; the next scan is 10
            # minutes away, so only the in-process wake-up can start it.
            deadline = time.monotonic() + DEADLINE
            while min(rl.worker.passes.values()) < 1:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            row = await rl.submit_message("agent-e", "t-1", "heard in-process")
            assert row["disposition"] == "created"
            await _until_state(rl.dsn, row["run_id"], "succeeded")
            again = await rl.run_now("agent-e")
            await _until_state(rl.dsn, again["run_id"], "succeeded")

    asyncio.run(scenario())


def test_a_data_directory_keeps_its_data_between_starts():
    # Under /tmp, not pytest's 0700 tmp_path: as root the server runs as another OS user.
    base = Path(tempfile.mkdtemp(prefix="runlane-embedded-test-"))
    base.chmod(0o755)
    datadir = base / "pg"

    async def scenario() -> None:
        async with Embedded(EchoAgent(chunks=1), datadir, maintenance=None) as rl:
            await _execute(rl.dsn, SETUP)
        # The second start takes a new free port and pins it into the reused conf.
        async with Embedded(EchoAgent(chunks=1), datadir, maintenance=None) as rl:
            rows = await _execute(rl.dsn, "select agent_id from runlane.agents")
            assert rows == [("agent-e",)]

    try:
        asyncio.run(scenario())
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_stop_reaches_the_embedded_worker_in_process():
    """Embedded mode hears no notification: cancel_run tells its worker in-process. The
    lease is 300 s, so no heartbeat is due before the run ends."""

    async def scenario() -> None:
        async with Embedded(
            EchoAgent(chunks=1000, delay=5), scan_interval=0.3, lease=300, maintenance=None
        ) as rl:
            await _execute(rl.dsn, SETUP)
            row = await rl.submit_message("agent-e", "t-1", "a long answer, please")
            await _until_state(rl.dsn, row["run_id"], "running")
            deadline = time.monotonic() + DEADLINE
            while row["run_id"] not in rl.worker.runs:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            handle = rl.worker.runs[row["run_id"]]
            assert await rl.cancel_run(row["run_id"]) == "running"
            await _until_state(rl.dsn, row["run_id"], "canceled")
            # Stopped by the in-process hint, not by a refused write (the agent sleeps 5 s
            # between writes) nor a heartbeat (every 100 s).
            assert handle.lost_why == "stop_requested"
            assert await _execute(
                rl.dsn,
                f"""
                select reason, (select count(*) from runlane.run_events as e
                                where e.run_id = r.run_id and e.event = 'run.finished')
                from runlane.runs as r where r.run_id = {int(row["run_id"])}
            """,
            ) == [("canceled", 1)]
            assert await rl.cancel_run(row["run_id"]) == "canceled"

    asyncio.run(scenario())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _embedded(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "runlane", "embedded", "--data-dir", "", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_runlane_embedded_listens_on_the_port_it_is_given():
    port = _free_port()
    proc = _embedded("--port", str(port))
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(li) for li in proc.stdout], daemon=True).start()
    seen = []
    try:
        deadline = time.monotonic() + DEADLINE
        while not any('"worker.started"' in line for line in seen):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, f"the worker never started: {seen}"
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=0.1))
        started = next(json.loads(li) for li in seen if '"embedded.started"' in li)
        assert f"@127.0.0.1:{port}/" in started["embedded.dsn"]
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres") as conn:
            assert conn.execute("show port").fetchone()[0] == str(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=DEADLINE)
    assert proc.returncode == 0, proc.stderr.read()


def test_runlane_embedded_on_a_taken_port_says_so():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _embedded("--port", str(port))
        out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 1, out
    assert f"error: port {port} on 127.0.0.1 is taken by another program" in err
    assert "Traceback" not in err
