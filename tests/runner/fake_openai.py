"""A fake OpenAI-compatible `/v1/chat/completions` server for the runner's tests: a real
HTTP server on loopback (HTTP/1.0: a streamed body ends when the connection closes),
answering each request from a script of `Reply`s (then the default reply), streaming
SSE chunks with `finish_reason` and `[DONE]` unless told otherwise.

What a reply can be told to do:
- `status`, `retry_after`, `error`: answer an HTTP error with a Retry-After header and an
  OpenAI-style JSON body {"error": {"message": error, "type": …, "code": …}};
- `delay`: wait before the status line (a slow or, when long, a stalled provider);
- `stall_first`: send the status line and a role chunk, then nothing (no first token);
- `gap`: seconds between tokens (a slow stream); `stall_after`: stop sending after that
  many tokens, keeping the connection open;
- `bad_json`: send a malformed chunk after the tokens;
- `truncate`: close after the tokens with neither finish_reason nor [DONE];
- `hold`, `endless`, `usage`: wait for an event after the first token, stream until the
  client goes away, send `usage` at the end.
`rules` answer by content instead, every time: the first rule whose key is in the
request's last message gives its reply (a reply per run, whatever the order of requests).
A stall lasts until the client closes the connection or the server closes (never past
`close()`); `closed_by_client` is set when a client went away mid-stream.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """How the server answers one request."""

    status: int = 200
    retry_after: str | None = None
    error: str = "slow down"
    tokens: list[str] = field(default_factory=lambda: ["Hel", "lo, ", "wor", "ld"])
    usage: dict[str, Any] | None = None
    delay: float = 0.0
    stall_first: bool = False
    gap: float = 0.0
    stall_after: int | None = None
    bad_json: bool = False
    truncate: bool = False
    hold: threading.Event | None = None  # after the first token, wait for it to be set
    endless: bool = False  # keep streaming until the client goes away


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    404: "model_not_found",
    408: "timeout",
    429: "rate_limit_exceeded",
}


class FakeOpenAI:
    """The server: `script` answers requests in order, `requests` records each one."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.rules: dict[str, Reply] = {}
        self.requests: list[dict[str, Any]] = []
        self.closed_by_client = threading.Event()
        self.stopping = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("Content-Length", 0))
                fake.requests.append(
                    {
                        "at": time.monotonic(),
                        "path": self.path,
                        "authorization": self.headers.get("Authorization"),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                reply = fake.reply_for(fake.requests[-1]["body"])
                try:
                    fake.answer(self, reply)
                except (BrokenPipeError, ConnectionResetError):
                    fake.closed_by_client.set()

            def log_message(self, *args):  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reply_for(self, body: dict[str, Any]) -> Reply:
        last = str((body.get("messages") or [{}])[-1].get("content", ""))
        for key, reply in self.rules.items():
            if key in last:
                return reply
        return self.script.pop(0) if self.script else Reply()

    def stall(self, handler: BaseHTTPRequestHandler, seconds: float = 300.0) -> None:
        """Send nothing until the client closes the connection (or the server stops)."""
        deadline = time.monotonic() + seconds
        handler.connection.settimeout(0.05)
        while time.monotonic() < deadline and not self.stopping.is_set():
            try:
                if handler.connection.recv(1) == b"":  # the client closed its side
                    self.closed_by_client.set()
                    return
            except TimeoutError:
                continue
            except OSError:
                self.closed_by_client.set()
                return

    def answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.delay:
            deadline = time.monotonic() + reply.delay
            while time.monotonic() < deadline and not self.stopping.is_set():
                time.sleep(0.02)
        if reply.status != 200:
            body = json.dumps(
                {
                    "error": {
                        "message": reply.error,
                        "type": ERROR_TYPES.get(reply.status, "server_error"),
                        "code": None,
                    }
                }
            ).encode()
            handler.send_response(reply.status)
            if reply.retry_after is not None:
                handler.send_header("Retry-After", reply.retry_after)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()

        def send(chunk: dict[str, Any] | str) -> None:
            data = chunk if isinstance(chunk, str) else json.dumps(chunk)
            handler.wfile.write(f"data: {data}\n\n".encode())
            handler.wfile.flush()

        send({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        if reply.stall_first:
            self.stall(handler)
            return
        for i, token in enumerate(reply.tokens):
            if reply.stall_after is not None and i == reply.stall_after:
                self.stall(handler)
                return
            if i and reply.gap:
                time.sleep(reply.gap)
            send({"choices": [{"index": 0, "delta": {"content": token}}]})
            if i == 0 and reply.hold is not None:
                reply.hold.wait(60)
        if reply.endless:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not self.stopping.is_set():
                send({"choices": [{"index": 0, "delta": {"content": "more "}}]})
                time.sleep(0.02)
            return
        if reply.bad_json:
            send('{"choices": [{"index": 0, "delta": {"content": "x"')
            return
        if reply.truncate:
            return  # the connection closes: no finish_reason, no [DONE]
        send({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if reply.usage is not None:
            send({"choices": [], "usage": reply.usage})
        send("[DONE]")

    def close(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
