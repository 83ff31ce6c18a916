"""A throwaway PostgreSQL cluster on loopback, for tests, benchmarks and embedded mode.

PostgreSQL refuses to run as root, so when we are root the cluster belongs to an
unprivileged OS user (`postgres` where the server package created it, else a system
user `runlane` that we create) and every server command runs through `runuser`.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

# Not "runlane": with search_path "$user", public a superuser named like the schema
# would resolve unqualified names (and CREATE EXTENSION) into the runlane schema.
SUPERUSER = "postgres"

# Durability is worth nothing in a throwaway cluster; speed is.
FAST_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "256MB",
    "listen_addresses": "127.0.0.1",
    "log_min_messages": "warning",
}


def find_bindir() -> Path:
    """The newest PostgreSQL server binaries on this machine (or $RUNLANE_PG_BINDIR)."""
    if env := os.environ.get("RUNLANE_PG_BINDIR"):
        return Path(env)
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: int(Path(p).parent.parent.name),
    )
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    raise RuntimeError("no PostgreSQL server binaries found; set RUNLANE_PG_BINDIR")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_user() -> str | None:
    """The OS user to run the server as, or None to run as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "runlane"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "runlane"],
        check=True,
    )
    return "runlane"


class LocalCluster:
    """initdb + pg_ctl around one data directory, listening on 127.0.0.1:port."""

    def __init__(
        self,
        datadir: Path | None = None,
        port: int | None = None,
        settings: dict[str, str] | None = None,
    ):
        self.bindir = find_bindir()
        self.os_user = _server_user()
        self._own_dir = datadir is None
        if datadir is None:
            datadir = Path(tempfile.mkdtemp(prefix="runlane-pg-"))
        self.datadir = Path(datadir)
        self.port = port or _free_port()
        self.settings = {**FAST_SETTINGS, **(settings or {})}
        self.logfile = self.datadir.parent / f"{self.datadir.name}.log"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.os_user:
            cmd = ["runuser", "-u", self.os_user, "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True)

    def _chown(self, path: Path) -> None:
        if self.os_user:
            pw = pwd.getpwnam(self.os_user)
            os.chown(path, pw.pw_uid, pw.pw_gid)

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, dbname: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def initdb(self) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        self._chown(self.datadir)
        if (self.datadir / "PG_VERSION").exists():
            return
        self._run(
            "initdb",
            "-D",
            str(self.datadir),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )
        with open(self.datadir / "postgresql.auto.conf", "a") as conf:
            for key, value in self.settings.items():
                conf.write(f"{key} = '{value}'\n")
            conf.write(f"port = {self.port}\n")
            conf.write(f"unix_socket_directories = '{self.datadir}'\n")

    def start(self) -> str:
        self.initdb()
        self.logfile.touch()
        self._chown(self.logfile)
        result = self._run(
            "pg_ctl",
            "-D",
            str(self.datadir),
            "-l",
            str(self.logfile),
            "-w",
            "-t",
            "60",
            "start",
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"PostgreSQL did not start: {result.stderr.strip()}\n{self._log_tail()}"
            )
        self.wait_ready()
        return self.dsn

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "stop", check=False)

    def restart(self, mode: str = "fast") -> None:
        """Stop in `mode` (fast or immediate) and start again on the same port."""
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        self.stop("immediate")
        if self._own_dir:
            shutil.rmtree(self.datadir, ignore_errors=True)
            self.logfile.unlink(missing_ok=True)

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.logfile.read_text().splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()
