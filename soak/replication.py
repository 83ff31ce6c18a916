"""A primary and a streaming standby from the machine's PostgreSQL binaries, for failover
tests: kill the primary with SIGKILL, promote the standby (`pg_ctl promote`, what Patroni
does), rebuild the old primary as the new standby (`pg_rewind`, or a fresh base backup).

    with ReplicatedPair(sync=True) as pair:
        dsn = pair.dsn_for("postgres")       # host=…,… port=P0,P1 target_session_attrs=read-write
        pair.kill_primary()                  # SIGKILL of the postmaster (and its children)
        pair.promote()                       # the standby is the primary now
        pair.rebuild_standby("rewind")       # the old primary follows the new one

Both nodes listen on 127.0.0.1 and run as the unprivileged user runlane.pgcluster uses
(LocalCluster, _server_user). Each node keeps its own port: a client with the multi-host
DSN finds whichever is primary (libpq's target_session_attrs=read-write skips a standby
and a dead port). Sync mode: the primary names its standby in synchronous_standby_names
and commits with synchronous_commit = on, so an acknowledged commit is on the standby's
disk; async mode: the same without synchronous_standby_names, so the last acknowledged
commits may not have reached the standby when the primary dies. A promoted node starts
without synchronous_standby_names (it has no standby yet: non-strict sync, as Patroni's
synchronous_mode does) and names its standby again once one streams from it.

Everything (data directories, logs) lives in one temporary directory that close()
removes, after stopping both servers in immediate mode; close() runs on failure too
(a context manager, or call it in a finally).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import psycopg

from runlane.pgcluster import SUPERUSER, LocalCluster, _free_port, _server_user

# What replication needs, and what the checks read: commit timestamps (track_commit_timestamp,
# on both nodes: a standby replays them), hint bits in WAL for pg_rewind (wal_log_hints),
# full_page_writes (pg_rewind refuses a source without it). fsync stays off: a SIGKILL of
# the server loses no page the kernel holds, and the machine has 2 shared cores.
REPLICATION_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "wal_level": "replica",
    "wal_log_hints": "on",
    "hot_standby": "on",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "wal_keep_size": "512MB",
    "track_commit_timestamp": "on",
    "max_connections": "300",
    "wal_receiver_status_interval": "1s",
    "wal_retrieve_retry_interval": "200ms",
}


class Node:
    """One of the two servers: a LocalCluster on its own data directory and port."""

    def __init__(self, name: str, root: Path, settings: dict[str, str]):
        self.name = name
        self.cluster = LocalCluster(datadir=root / name, port=_free_port(), settings=settings)

    @property
    def port(self) -> int:
        return self.cluster.port

    @property
    def datadir(self) -> Path:
        return self.cluster.datadir

    def dsn_for(self, dbname: str) -> str:
        return self.cluster.dsn_for(dbname)

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={dbname}"

    def run(self, *args: str, check: bool = True):
        return self.cluster._run(*args, check=check)

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.datadir / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def processes(self) -> list[int]:
        """The postmaster and every process it started (by parent pid, from /proc)."""
        root = self.postmaster_pid()
        if root is None:
            return []
        found = [root]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
                if ppid == root:
                    found.append(int(entry.name))
        return found

    def own_settings(self, standby_of: Node | None) -> None:
        """This node's own lines, appended to postgresql.auto.conf (later lines win): a
        base backup or pg_rewind copies the other node's file, its port and socket
        directory with it. A standby also gets standby.signal and its primary_conninfo."""
        # The socket outside the data directory: pg_rewind would try to copy it.
        sockets = self.datadir.parent / f"{self.name}.sockets"
        sockets.mkdir(exist_ok=True)
        self.cluster._chown(sockets)
        lines = [
            f"port = {self.port}",
            f"unix_socket_directories = '{sockets}'",
            "synchronous_standby_names = ''",
        ]
        if standby_of is not None:
            lines += [
                f"primary_conninfo = '{standby_of.conninfo()} application_name={self.name}'",
                f"primary_slot_name = '{self.name}'",
                "recovery_target_timeline = 'latest'",
            ]
            signal_file = self.datadir / "standby.signal"
            signal_file.touch()
            self.cluster._chown(signal_file)
        with open(self.datadir / "postgresql.auto.conf", "a") as conf:
            conf.write("\n".join(lines) + "\n")

    def stop_quietly(self) -> None:
        """Immediate stop, and SIGKILL for whatever of it is left (close() and rebuilds)."""
        if self.postmaster_pid() is not None and (self.datadir / "postmaster.pid").exists():
            self.cluster.stop("immediate")
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _wait_gone(self.processes_alive, 10.0)
        (self.datadir / "postmaster.pid").unlink(missing_ok=True)

    def processes_alive(self) -> list[int]:
        alive = []
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, 0)
                if not _zombie(pid):
                    alive.append(pid)
        return alive


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] == "Z"
    except (OSError, ValueError, IndexError):
        return True


def _wait_gone(alive, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while alive() and time.monotonic() < deadline:
        time.sleep(0.02)


class ReplicatedPair:
    """A primary and a streaming standby (see the module's docstring)."""

    def __init__(
        self, sync: bool = True, settings: dict[str, str] | None = None, workdir: Path | None = None
    ):
        self.sync = sync
        self.root = Path(workdir or tempfile.mkdtemp(prefix="runlane-repl-"))
        self.os_user = _server_user()
        if self.os_user:  # the server user must reach its data directories
            os.chmod(self.root, 0o755)
        merged = {**REPLICATION_SETTINGS, **(settings or {})}
        self.nodes = [Node("node0", self.root, merged), Node("node1", self.root, merged)]
        self.primary, self.standby = self.nodes
        self.failovers = 0
        self.rebuilds: list[str] = []  # how each standby was rebuilt: rewind / basebackup

    # -- addresses ---------------------------------------------------------------------
    def dsn_for(self, dbname: str) -> str:
        """Both nodes, in a fixed order: libpq connects to the one that accepts writes."""
        hosts = ",".join("127.0.0.1" for _ in self.nodes)
        ports = ",".join(str(n.port) for n in self.nodes)
        return (
            f"host={hosts} port={ports} user={SUPERUSER} dbname={dbname} "
            "target_session_attrs=read-write connect_timeout=3"
        )

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    # -- life ----------------------------------------------------------------------------
    def start(self) -> ReplicatedPair:
        primary = self.primary
        primary.cluster.initdb()
        primary.own_settings(None)
        with open(primary.datadir / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        primary.cluster.start()
        self._make_standby(self.standby, primary)
        return self

    def _make_standby(self, node: Node, primary: Node) -> None:
        """A fresh base backup of `primary` into `node`'s (empty) data directory, started
        as its streaming standby through a replication slot; synchronous once it streams
        (sync mode)."""
        self._create_slot(primary, node.name)
        shutil.rmtree(node.datadir, ignore_errors=True)
        node.datadir.mkdir(parents=True)
        node.cluster._chown(node.datadir)
        os.chmod(node.datadir, 0o700)
        node.run(
            "pg_basebackup",
            "-d",
            primary.conninfo(),
            "-D",
            str(node.datadir),
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
        )
        node.own_settings(primary)
        self._start_standby(node, primary)

    def _create_slot(self, primary: Node, name: str) -> None:
        with psycopg.connect(primary.dsn_for("postgres"), autocommit=True) as conn:
            conn.execute(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
                "where slot_name = %s and not active",
                (name,),
            )
            if not conn.execute(
                "select 1 from pg_replication_slots where slot_name = %s", (name,)
            ).fetchone():
                conn.execute("select pg_create_physical_replication_slot(%s, true)", (name,))

    def _start_standby(self, node: Node, primary: Node) -> None:
        node.cluster.start()
        self.wait_streaming(primary, node)
        self.wait_caught_up(primary, node)
        if self.sync:
            with psycopg.connect(primary.dsn_for("postgres"), autocommit=True) as conn:
                conn.execute(f"alter system set synchronous_standby_names = '{node.name}'")
                conn.execute("select pg_reload_conf()")
            self.wait_streaming(primary, node, state="sync")

    def wait_streaming(
        self, primary: Node, node: Node, state: str | None = None, timeout: float = 60.0
    ) -> None:
        """Until `primary` streams to `node` (and, with `state`, reports that sync_state)."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(primary.dsn_for("postgres"), autocommit=True) as conn:
            while True:
                row = conn.execute(
                    "select state, sync_state from pg_stat_replication where application_name = %s",
                    (node.name,),
                ).fetchone()
                if row and row[0] == "streaming" and (state is None or row[1] == state):
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{node.name} does not stream from {primary.name} "
                        f"({row}): {node.cluster._log_tail()}"
                    )
                time.sleep(0.05)

    def wait_caught_up(
        self, primary: Node | None = None, node: Node | None = None, timeout: float = 60.0
    ) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        primary, node = primary or self.primary, node or self.standby
        with psycopg.connect(primary.dsn_for("postgres"), autocommit=True) as conn:
            target = conn.execute("select pg_current_wal_lsn()").fetchone()[0]
        deadline = time.monotonic() + timeout
        with psycopg.connect(node.dsn_for("postgres"), autocommit=True) as conn:
            while not conn.execute(
                "select pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)
            ).fetchone()[0]:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{node.name} did not catch up with {primary.name}: "
                        f"{node.cluster._log_tail()}"
                    )
                time.sleep(0.05)

    def hold_replication(self) -> None:
        """SIGSTOP of the primary's WAL senders: from now on the primary commits WAL its
        standby does not receive (an async standby's lag, made visible). The kill that
        follows takes the stopped senders with it, and that WAL with them. Sync mode
        would stop every commit instead (each waits for the standby)."""
        with psycopg.connect(self.primary.dsn_for("postgres"), autocommit=True) as conn:
            pids = [r[0] for r in conn.execute("select pid from pg_stat_replication")]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)

    def kill_primary(self) -> float:
        """SIGKILL of the primary's postmaster (its pid from postmaster.pid), then of every
        process it started, as a machine that dies takes them all: no backend finishes
        what it was doing. Returns the time of the kill (epoch seconds)."""
        node = self.primary
        pid = node.postmaster_pid()
        if pid is None:
            raise RuntimeError(f"{node.name} is not running")
        children = node.processes()
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        _wait_gone(node.processes_alive, 10.0)
        return killed_at

    def promote(self) -> float:
        """`pg_ctl promote -w` of the standby, which becomes the primary (its
        synchronous_standby_names is empty: it has no standby yet). Returns when the
        promoted node accepts writes (epoch seconds)."""
        node = self.standby
        node.run("pg_ctl", "-D", str(node.datadir), "-w", "-t", "60", "promote")
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(
                    node.dsn_for("postgres"), autocommit=True, connect_timeout=2
                ) as conn:
                    if not conn.execute("select pg_is_in_recovery()").fetchone()[0]:
                        break
            except psycopg.OperationalError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the promoted standby does not accept writes")
            time.sleep(0.02)
        self.primary, self.standby = node, self.primary
        self.failovers += 1
        return time.time()

    def rebuild_standby(self, how: str = "rewind") -> str:
        """The old primary (killed) follows the new one: `pg_rewind` (which first runs
        crash recovery on it) or, when asked or when the rewind fails, a fresh base
        backup. Returns how it was rebuilt."""
        node, primary = self.standby, self.primary
        node.stop_quietly()
        done = "basebackup"
        if how == "rewind":
            self._create_slot(primary, node.name)
            # Until its first checkpoint the promoted node's control file still names the
            # old timeline, and pg_rewind would find "no rewind required".
            with psycopg.connect(primary.dsn_for("postgres"), autocommit=True) as conn:
                conn.execute("checkpoint")
            result = node.run(
                "pg_rewind",
                "--target-pgdata",
                str(node.datadir),
                "--source-server",
                primary.conninfo(),
                "--no-sync",
                check=False,
            )
            if result.returncode == 0:
                node.own_settings(primary)
                self._start_standby(node, primary)
                done = "rewind"
            else:
                self.rewind_errors = getattr(self, "rewind_errors", []) + [
                    (result.stderr or result.stdout).strip()[-500:]
                ]
        if done == "basebackup":
            self._make_standby(node, primary)
        self.rebuilds.append(done)
        return done

    def close(self) -> None:
        """Both servers stopped (immediate) and every file removed."""
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop_quietly()
        shutil.rmtree(self.root, ignore_errors=True)

    # The names Chaos uses for its cluster.
    def destroy(self) -> None:
        self.close()

    def stop(self, mode: str = "fast") -> None:
        for node in self.nodes:
            node.cluster.stop(mode)

    def __enter__(self) -> ReplicatedPair:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()
