"""A TCP proxy on loopback between runlane workers and PostgreSQL that loses one reply.

`proxy.arm(b"pattern")` makes it watch what clients send: the first client message
containing the pattern goes through to the server untouched, and the server's reply to it
is held back until its ReadyForQuery (so the server has executed and committed the
statement), then dropped: both sides of that connection are closed instead of forwarding
it. The client sees its connection break after the server committed, which is exactly a
lost acknowledgement. One shot: `proxy.dropped` is set, and the proxy forwards everything
else as a plain TCP relay. It runs its own event loop in a thread, so synchronous tests
and worker subprocesses can use it alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading

import psycopg.conninfo


class ReplyDroppingProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.dropped = threading.Event()
        self._pattern: bytes | None = None
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @classmethod
    def for_dsn(cls, dsn: str) -> ReplyDroppingProxy:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
        return cls(str(params.get("host", "127.0.0.1")), int(params.get("port", 5432)))

    def dsn(self, dsn: str) -> str:
        """`dsn` pointed at the proxy (plain TCP: no SSL or GSS negotiation)."""
        return psycopg.conninfo.make_conninfo(
            dsn, host="127.0.0.1", port=self.port, sslmode="disable", gssencmode="disable"
        )

    def arm(self, pattern: bytes) -> None:
        with self._lock:
            self._pattern = pattern
            self.dropped.clear()

    def start(self) -> ReplyDroppingProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    # -- the relay -----------------------------------------------------------------------
    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    def _take_trigger(self, seen: bytes) -> bool:
        """True (once) when `seen` holds the armed pattern: disarms the proxy."""
        with self._lock:
            if self._pattern is not None and self._pattern in seen:
                self._pattern = None
                return True
        return False

    async def _connection(
        self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            return
        state = {"drop": False}

        def close_both() -> None:
            for writer in (client_w, server_w):
                with contextlib.suppress(Exception):
                    writer.transport.abort()

        async def upstream() -> None:
            tail = b""
            while data := await client_r.read(65536):
                seen = tail + data
                tail = seen[-256:]
                if not state["drop"] and self._take_trigger(seen):
                    state["drop"] = True
                server_w.write(data)
                await server_w.drain()
            close_both()

        async def downstream() -> None:
            held = b""
            while data := await server_r.read(65536):
                if not state["drop"]:
                    client_w.write(data)
                    await client_w.drain()
                    continue
                held += data
                if _holds_ready_for_query(held):
                    # The server executed and committed: lose its whole reply.
                    self.dropped.set()
                    close_both()
                    return
            close_both()

        await asyncio.gather(upstream(), downstream(), return_exceptions=True)


def _holds_ready_for_query(data: bytes) -> bool:
    """Whether the backend messages in `data` (type byte + int32 length each) include a
    complete ReadyForQuery ('Z')."""
    at = 0
    while at + 5 <= len(data):
        kind = data[at : at + 1]
        (length,) = struct.unpack("!i", data[at + 1 : at + 5])
        if at + 1 + length > len(data):
            return False
        if kind == b"Z":
            return True
        at += 1 + length
    return False
