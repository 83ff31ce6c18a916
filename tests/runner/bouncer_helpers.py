"""A throwaway PgBouncer (Debian's `pgbouncer`, installed by `make setup`) in front of the
test cluster, for tests/runner/test_pgbouncer.py.

Each Bouncer is one pgbouncer process in the foreground, as the unprivileged OS user the
cluster runs as when we are root (runlane.pgcluster._server_user), listening on
127.0.0.1 and a free port (no Unix socket, so it never meets the package's own service),
with a generated pgbouncer.ini and userlist in its own temporary folder: the wildcard
database `*` forwards every database name to the cluster, `auth_type = trust` as the
cluster itself (the userlist only names who may log in). stop() ends the process and
removes the folder.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from psycopg.conninfo import make_conninfo

from runlane.pgcluster import _free_port, _server_user

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


class Bouncer:
    """One pgbouncer process in `pool_mode`, `pool_size` server connections per
    (database, user) pool, in front of the cluster listening on 127.0.0.1:`server_port`."""

    def __init__(self, server_port: int, pool_mode: str, users: list[str], pool_size: int = 2):
        self.pool_mode = pool_mode
        self.pool_size = pool_size
        self.port = _free_port()
        self.os_user = _server_user()
        self.dir = Path(tempfile.mkdtemp(prefix=f"runlane-bouncer-{pool_mode}-"))
        (self.dir / "userlist.txt").write_text("".join(f'"{u}" ""\n' for u in users))
        (self.dir / "pgbouncer.ini").write_text(f"""\
[databases]
* = host=127.0.0.1 port={server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir}/userlist.txt
pool_mode = {pool_mode}
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 200
max_db_connections = 0
logfile = {self.dir}/pgbouncer.log
pidfile = {self.dir}/pgbouncer.pid
""")
        if self.os_user:
            pw = pwd.getpwnam(self.os_user)
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, pw.pw_uid, pw.pw_gid)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> Bouncer:
        cmd = [PGBOUNCER, str(self.dir / "pgbouncer.ini")]
        if self.os_user:
            cmd = ["runuser", "-u", self.os_user, "--", *cmd]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"pgbouncer exited ({self.proc.returncode}): "
                    f"{self.proc.stderr.read() if self.proc.stderr else ''}"
                    f"\n{self.log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def dsn(self, db_dsn: str, user: str | None = None) -> str:
        """`db_dsn` (a database of the cluster) through this bouncer, as `user` if given."""
        extra = {"user": user} if user else {}
        return make_conninfo(db_dsn, host="127.0.0.1", port=str(self.port), **extra)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.dir / "pgbouncer.log").read_text().splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGINT to pgbouncer itself (its pidfile: runuser may not pass signals on), then
        the process we started; the folder is removed."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                pid = int((self.dir / "pgbouncer.pid").read_text().strip())
                os.kill(pid, signal.SIGINT)
            except (OSError, ValueError):
                self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
