"""A loopback TCP proxy in front of PostgreSQL that, when armed, loses a committed reply.

    dropper = ReplyDropper(upstream_port=5432, lifetime=600)
    port = dropper.start()                  # listens on 127.0.0.1:<port>, a thread of its own
    dsn = f"postgresql://user@127.0.0.1:{port}/db?sslmode=disable&gssencmode=disable"
    dropper.arm("finish")                   # lose the reply to the next committed finish
    ...
    dropper.drops                           # what was lost: kind, time, run ids (no text)
    dropper.close()

Between the client and the server it forwards every byte as it is, and it parses the
frontend/backend protocol (v3) only as far as it needs to: each request unit (a simple
`Query`, or the extended-protocol messages up to `Sync`) is matched, by its statement
text, against the armed kinds (`claim`: claim_runs; `finish`: finish_run(s); `step`:
append_output/save_checkpoint without a finish). The reply to an armed unit is held back
until its `ReadyForQuery`; when that says the transaction is over (`I`, idle) and no
`ErrorResponse` came, the server committed: the proxy then closes both sides instead of
forwarding the reply. That is a lost acknowledgement after commit, exactly what a network
failure between the server's commit and the client's read produces. A unit that failed,
or left a transaction open, or a claim that claimed nothing, is forwarded untouched and
the kind stays armed.

From the lost reply (its `RowDescription`/`DataRow`s, text format) or the unit's `Bind`
parameters (`p_run_id => $n`, `p_fence => $n`, text or binary) it records which runs the
lost statement wrote, so a checker can tell what a lost acknowledgement cost. It records
ids only, never statement parameters or result text (which hold prompts and messages).

Loopback only (it binds 127.0.0.1 and connects to the given upstream host, by default
127.0.0.1), no TLS (an SSLRequest or GSSENCRequest is answered `N`, as by a server
without TLS), and it closes itself after `lifetime` seconds at the latest.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102

KINDS: dict[str, re.Pattern[str]] = {
    # Order matters: the first match names the unit (a finish also appends outputs).
    "claim": re.compile(r"runlane\.claim_runs\s*\(", re.I),
    "finish": re.compile(r"runlane\.finish_runs?\s*\(", re.I),
    "step": re.compile(r"runlane\.(append_output|save_checkpoint)\s*\(", re.I),
    "outputs": re.compile(r"runlane\.append_outputs\s*\(", re.I),  # a worker's batch
}
_PARAM = {name: re.compile(rf"{name}\s*=>\s*\$(\d+)") for name in ("p_run_id", "p_fence")}


def classify(query: str) -> str | None:
    for kind, pattern in KINDS.items():
        if pattern.search(query):
            return kind
    return None


def _cstring(buf: bytes, pos: int) -> tuple[str, int]:
    end = buf.index(b"\0", pos)
    return buf[pos:end].decode("utf-8", "replace"), end + 1


def _int_value(raw: bytes | None, fmt: int) -> int | None:
    if raw is None:
        return None
    try:
        if fmt == 1:
            return int.from_bytes(raw, "big", signed=True) if len(raw) in (2, 4, 8) else None
        return int(raw.decode())
    except ValueError:
        return None


def parse_bind(payload: bytes) -> tuple[str, list[tuple[bytes | None, int]]]:
    """(statement name, [(raw value or None, format code)]) of a Bind message."""
    _portal, pos = _cstring(payload, 0)
    stmt, pos = _cstring(payload, pos)
    (nfmt,) = struct.unpack_from("!h", payload, pos)
    pos += 2
    fmts = list(struct.unpack_from(f"!{nfmt}h", payload, pos)) if nfmt else []
    pos += 2 * nfmt
    (nparams,) = struct.unpack_from("!h", payload, pos)
    pos += 2
    params: list[tuple[bytes | None, int]] = []
    for i in range(nparams):
        (length,) = struct.unpack_from("!i", payload, pos)
        pos += 4
        raw = None
        if length >= 0:
            raw = payload[pos : pos + length]
            pos += length
        fmt = fmts[i] if len(fmts) > 1 else (fmts[0] if fmts else 0)
        params.append((raw, fmt))
    return stmt, params


@dataclass
class _Unit:
    """One request unit and what the proxy does with its reply."""

    kind: str | None = None
    drop: bool = False
    generation: int = 0  # of the arming it was taken from
    query: str = ""
    params: list[tuple[bytes | None, int]] = field(default_factory=list)


@dataclass
class Drop:
    kind: str
    at: float  # epoch seconds: the reply was complete and discarded
    run_ids: list[int]
    fences: list[int | None]
    attempts: list[int | None]
    client: str  # the client's application_name, when it sent one


class _Conn:
    """One client connection and its server connection."""

    def __init__(
        self, proxy: ReplyDropper, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ):
        self.proxy = proxy
        self.c_reader, self.c_writer = reader, writer
        self.s_reader: asyncio.StreamReader | None = None
        self.s_writer: asyncio.StreamWriter | None = None
        self.units: deque[_Unit] = deque([_Unit()])  # the startup exchange first
        self.pending = _Unit()
        self.prepared: dict[str, str] = {}
        self.application_name = ""
        self.closed = False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for w in (self.c_writer, self.s_writer):
            if w is not None:
                with contextlib.suppress(Exception):
                    w.transport.abort()  # RST-like: no orderly goodbye, as a lost link

    async def run(self) -> None:
        try:
            startup = await self._read_startup()
            if startup is None:
                return
            self.s_reader, self.s_writer = await asyncio.open_connection(
                self.proxy.upstream_host, self.proxy.upstream_port
            )
            self.s_writer.write(startup)
            await asyncio.gather(self._client_to_server(), self._server_to_client())
        except (OSError, asyncio.IncompleteReadError, ValueError, struct.error):
            pass
        finally:
            self.close()
            self.proxy._forget(self)

    async def _read_startup(self) -> bytes | None:
        while True:
            head = await self.c_reader.readexactly(4)
            (length,) = struct.unpack("!i", head)
            if length < 8 or length > 10_000:
                return None
            body = await self.c_reader.readexactly(length - 4)
            (code,) = struct.unpack_from("!i", body, 0)
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                self.c_writer.write(b"N")  # no TLS here: the client goes on in plain text
                await self.c_writer.drain()
                continue
            if code == CANCEL_REQUEST:
                return head + body
            fields = body[4:].split(b"\0")
            for key, value in zip(fields[::2], fields[1::2], strict=False):
                if key == b"application_name":
                    self.application_name = value.decode("utf-8", "replace")
            return head + body

    async def _client_to_server(self) -> None:
        while True:
            head = await self.c_reader.readexactly(5)
            mtype = head[:1]
            (length,) = struct.unpack_from("!i", head, 1)
            payload = await self.c_reader.readexactly(length - 4)
            self._note_client(mtype, payload)
            self.s_writer.write(head + payload)
            if mtype in (b"S", b"Q"):
                await self.s_writer.drain()
            if mtype == b"X":
                return

    def _note_client(self, mtype: bytes, payload: bytes) -> None:
        unit = self.pending
        if mtype == b"P":
            name, pos = _cstring(payload, 0)
            query, _ = _cstring(payload, pos)
            if name:
                self.prepared[name] = query
            unit.query = query
        elif mtype == b"B":
            stmt, params = parse_bind(payload)
            if stmt:
                unit.query = self.prepared.get(stmt, unit.query)
            unit.params = params
        elif mtype == b"C" and payload[:1] == b"S":
            name, _ = _cstring(payload, 1)
            self.prepared.pop(name, None)
        elif mtype == b"Q":
            unit.query, _ = _cstring(payload, 0)
        if mtype in (b"S", b"Q"):
            unit.kind = classify(unit.query)
            unit.drop, unit.generation = self.proxy._take(unit.kind)
            self.units.append(unit)
            self.pending = _Unit()

    async def _server_to_client(self) -> None:
        held: list[bytes] = []
        error = False
        names: list[str] = []
        rows: list[list[bytes | None]] = []
        while True:
            head = await self.s_reader.readexactly(5)
            mtype = head[:1]
            (length,) = struct.unpack_from("!i", head, 1)
            payload = await self.s_reader.readexactly(length - 4)
            unit = self.units[0] if self.units else None
            if unit is None or not unit.drop or mtype in (b"A", b"N", b"S") and not held:
                # Not armed (or an asynchronous message before the armed reply began).
                self.c_writer.write(head + payload)
                if mtype == b"Z":
                    if self.units:
                        self.units.popleft()
                    await self.c_writer.drain()
                continue
            held.append(head + payload)
            if mtype == b"E":
                error = True
            elif mtype == b"T":
                names = _row_description(payload)
            elif mtype == b"D":
                rows.append(_data_row(payload))
            elif mtype == b"Z":
                self.units.popleft()
                # A claim that took nothing is not worth losing: keep it armed.
                if not error and payload[:1] == b"I" and (unit.kind != "claim" or rows):
                    self.proxy._record(unit, names, rows, self.application_name)
                    self.close()
                    return
                # Not committed: hand it over as it is and keep the kind armed.
                self.proxy._take_back(unit.kind, unit.generation)
                for message in held:
                    self.c_writer.write(message)
                await self.c_writer.drain()
                held, error, names, rows = [], False, [], []


def _row_description(payload: bytes) -> list[str]:
    (n,) = struct.unpack_from("!h", payload, 0)
    pos, names = 2, []
    for _ in range(n):
        name, pos = _cstring(payload, pos)
        names.append(name)
        pos += 18  # table oid, column, type oid, size, modifier, format
    return names


def _data_row(payload: bytes) -> list[bytes | None]:
    (n,) = struct.unpack_from("!h", payload, 0)
    pos, values = 2, []
    for _ in range(n):
        (length,) = struct.unpack_from("!i", payload, pos)
        pos += 4
        if length < 0:
            values.append(None)
        else:
            values.append(payload[pos : pos + length])
            pos += length
    return values


class ReplyDropper:
    """The proxy; its own thread and event loop. Thread-safe: arm, drops, close."""

    def __init__(
        self, upstream_port: int, upstream_host: str = "127.0.0.1", lifetime: float = 3600.0
    ):
        if upstream_host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the reply dropper is for loopback only")
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.lifetime = lifetime
        self.port = 0
        self.drops: list[Drop] = []
        self.forwarded_units = 0
        self._armed: dict[str, int] = {}
        self._generation = 0  # a disarm starts a new one
        self._lock = threading.Lock()
        self._conns: set[_Conn] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._done: asyncio.Event | None = None

    # -- control (any thread) ----------------------------------------------------------
    def start(self) -> int:
        self._thread = threading.Thread(target=self._main, name="reply-dropper", daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or not self.port:
            raise RuntimeError("the reply dropper did not start")
        return self.port

    def arm(self, kind: str, count: int = 1) -> None:
        """Lose the replies of the next `count` committed units of this kind."""
        if kind not in KINDS:
            raise ValueError(kind)
        with self._lock:
            self._armed[kind] = self._armed.get(kind, 0) + count

    def disarm(self) -> dict[str, int]:
        """Stop dropping; returns what was still armed (not yet met)."""
        with self._lock:
            left, self._armed = self._armed, {}
            self._generation += 1
        return {k: v for k, v in left.items() if v > 0}

    def armed(self) -> dict[str, int]:
        with self._lock:
            return {k: v for k, v in self._armed.items() if v > 0}

    def close(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed() and self._done is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._done.set)
        if self._thread is not None:
            self._thread.join(10)

    # -- the proxy's own thread --------------------------------------------------------
    def _take(self, kind: str | None) -> tuple[bool, int]:
        with self._lock:
            if kind is not None and self._armed.get(kind, 0) > 0:
                self._armed[kind] -= 1
                return True, self._generation
            self.forwarded_units += 1
            return False, self._generation

    def _take_back(self, kind: str | None, generation: int) -> None:
        """A unit taken but not lost (it failed): armed again, unless disarmed since."""
        with self._lock:
            if kind is not None and generation == self._generation:
                self._armed[kind] = self._armed.get(kind, 0) + 1

    def _record(
        self, unit: _Unit, names: list[str], rows: list[list[bytes | None]], client: str
    ) -> None:
        run_ids: list[int] = []
        fences: list[int | None] = []
        attempts: list[int | None] = []
        if "run_id" in names:
            col = {n: i for i, n in enumerate(names)}
            for row in rows:
                if "ok" in col and row[col["ok"]] not in (b"t", b"true"):
                    continue  # finish_runs: that run's subtransaction was refused
                if "outcome" in col and row[col["outcome"]] == b"refused":
                    continue  # append_outputs: nothing of that run was written
                run_ids.append(_int_value(row[col["run_id"]], 0))
                fences.append(_int_value(row[col["fence"]], 0) if "fence" in col else None)
                attempts.append(_int_value(row[col["attempt"]], 0) if "attempt" in col else None)
        else:
            found = {}
            for name, pattern in _PARAM.items():
                m = pattern.search(unit.query)
                if m and int(m.group(1)) <= len(unit.params):
                    raw, fmt = unit.params[int(m.group(1)) - 1]
                    found[name] = _int_value(raw, fmt)
            if found.get("p_run_id") is not None:
                run_ids.append(found["p_run_id"])
                fences.append(found.get("p_fence"))
                attempts.append(None)
        with self._lock:
            self.drops.append(Drop(unit.kind or "", time.time(), run_ids, fences, attempts, client))

    def _forget(self, conn: _Conn) -> None:
        self._conns.discard(conn)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._done = asyncio.Event()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = _Conn(self, reader, writer)
            self._conns.add(conn)
            await conn.run()

        try:
            self._server = await asyncio.start_server(accept, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
        finally:
            self._ready.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._done.wait(), self.lifetime)
        self._server.close()
        for conn in list(self._conns):
            conn.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)
