"""The OpenAI-compatible agent in a real worker against a stub chat-completions server
on loopback: streamed deltas become visible outputs, and first_response is logged once."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import worker_helpers
from worker_helpers import MARKER, make_agent, run_state, submit, visible_outputs, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

DELTAS = ["Hel", "lo, ", "wor", "ld"]


@pytest.fixture
def stub_server():
    requests: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the stdlib's name
            length = int(self.headers.get("Content-Length", 0))
            requests.append({"path": self.path,
                             "authorization": self.headers.get("Authorization"),
                             "body": json.loads(self.rfile.read(length))})
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            first = {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}
            self.wfile.write(f"data: {json.dumps(first)}\n\n".encode())
            for delta in DELTAS:
                chunk = {"choices": [{"index": 0, "delta": {"content": delta}}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def log_message(self, *args):  # keep test output quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", requests
    server.shutdown()
    server.server_close()


def test_streamed_deltas_become_visible_outputs_and_first_response_is_logged_once(
        conn, workers, stub_server):
    base_url, requests = stub_server
    make_agent(conn, "agent-o")
    worker = workers("--no-maintenance", "--agent", "runlane.agents.openai:agent", env={
        "RUNLANE_OPENAI_BASE_URL": base_url, "RUNLANE_OPENAI_API_KEY": "test-key",
        "RUNLANE_OPENAI_MODEL": "stub-model"})
    run_id = submit(conn, "agent-o", "thread-1", "say hello")
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="the model run finished")

    assert [body for _, body in visible_outputs(conn, run_id)] == DELTAS
    assert len(requests) == 1
    request = requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["authorization"] == "Bearer test-key"
    assert request["body"]["model"] == "stub-model" and request["body"]["stream"] is True
    roles = [m["role"] for m in request["body"]["messages"]]
    assert roles == ["system", "user"]
    assert request["body"]["messages"][1]["content"] == f"say hello {MARKER}"

    worker.wait_for("run.finished", where=lambda r: r["run.id"] == run_id)
    first = [r for r in worker.events("run.first_response") if r["run.id"] == run_id]
    assert len(first) == 1
    assert first[0]["run.first_response_ms"] >= 0
