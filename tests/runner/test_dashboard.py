"""`runlane dashboard` over plain HTTP: every page against a seeded database, read by a
login that holds runlane_api only; content hidden unless asked; everything escaped; the
Stop button only with actions allowed; the token; and a real process whose overview
stream follows a change within its one-second tick."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time

import dashboard_helpers
import httpx
import pytest
from dashboard_helpers import SEEDED_LANES, seed
from psycopg.conninfo import conninfo_to_dict
from starlette.testclient import TestClient
from worker_helpers import DEADLINE, MARKER, submit

from runlane import eventloop
from runlane.dashboard import create_app, is_loopback

api_dsn = dashboard_helpers.api_dsn  # fixtures
dashboards = dashboard_helpers.dashboards


def client(dsn: str, **options) -> TestClient:
    return TestClient(create_app(dsn, **options), base_url="http://127.0.0.1")


def cells(html: str, lane: str) -> dict[str, str]:
    row = re.search(rf'<tr data-lane="{lane}">(.*?)</tr>', html, re.S).group(1)
    return dict(re.findall(r'data-field="(\w+)">([^<]*)<', row))


def test_overview_shows_each_lane_the_delay_warning_and_the_chart_data(conn, api_dsn):
    seed(conn)
    with client(api_dsn) as c:
        page = c.get("/")
    assert page.status_code == 200
    for lane, counts in SEEDED_LANES.items():
        shown = cells(page.text, lane)
        assert {k: int(shown[k]) for k in counts} == counts
    assert cells(page.text, "interactive")["oldest_due_wait_ms"].endswith(" s")
    # the chat run due for 50 s and the manual run due for 3 minutes: the warning is on
    assert re.search(r'<div id="delay" class="warning"\s*>', page.text)
    assert '<strong id="delay-runs">2</strong>' in page.text
    chart = json.loads(re.search(r'id="chart-data">(.*?)</script>', page.text, re.S).group(1))
    assert len(chart["x"]) == 60
    assert chart["interactive"]["queued"][-1] == 2  # first waits: the retry had started
    assert sum(chart["interactive"]["first_responses"]) == 3  # a queued retry answered once
    assert chart["background"]["p50_ms"].count(4000) == 1
    assert 'src="/static/uPlot.iife.min.js"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]


def test_no_warning_when_nothing_waits_too_long(conn, api_dsn):
    conn.execute("select runlane_test.agent('agent-calm', 'org-calm')")
    with client(api_dsn) as c:
        page = c.get("/").text
    assert re.search(r'<div id="delay" class="warning"\s*hidden', page)
    assert [int(cells(page, lane)["queued"]) for lane in ("interactive", "background")] == [0, 0]


def test_overview_names_a_handler_no_live_worker_serves(conn, api_dsn):
    conn.execute("select runlane_test.agent('agent-r', 'org-r')")
    conn.execute("update runlane.agents set handler = 'research' where agent_id = 'agent-r'")
    conn.execute("select runlane.submit_message('agent-r', 'thread-r', 'look it up')")
    # a live worker of other handlers, and one that serves research but stopped
    conn.execute("select runlane.register_worker('w-chat', '{interactive}', false, '{chat}')")
    conn.execute("select runlane.register_worker('w-gone', '{interactive}', true, '{research}')")
    with client(api_dsn) as c:
        page = c.get("/").text
    warning = re.search(
        r'<div class="warning unserved" data-handler="research">(.*?)</div>', page, re.S
    )
    assert warning is not None
    assert "1 queued interactive run(s)" in " ".join(warning.group(1).split())
    assert "no worker serves it" in warning.group(1)
    conn.execute("select runlane.register_worker('w-r', '{interactive}', false, '{research}')")
    with client(api_dsn) as c:
        assert 'data-handler="research"' not in c.get("/").text


def test_organizations_show_capacity_and_owner_spend_against_budget(conn, api_dsn):
    seed(conn)
    with client(api_dsn) as c:
        page = c.get("/orgs").text
    one = re.search(r'<tr data-org="org-one">(.*?)</tr>', page, re.S).group(1)
    assert 'data-field="agent_max_concurrency">4<' in one
    owner = re.search(r'data-owner="owner-of-org-one">(.*?)</div>', one, re.S).group(1)
    assert 'data-field="weekly_spend">30<' in owner
    assert 'data-field="weekly_budget">25<' in owner and "budget exhausted" in owner
    two = re.search(r'<tr data-org="org-two">(.*?)</tr>', page, re.S).group(1)
    assert 'data-field="queued_background">1<' in two and "no budget" in two


def test_agents_list_filter_and_journal(conn, api_dsn):
    seed(conn)
    with client(api_dsn) as c:
        listing = c.get("/agents").text
        filtered = c.get("/agents", params={"q": "TIMER"}).text
        off = c.get("/agents", params={"status": "off"}).text
        journal = c.get("/agents/agent-chat").text
        missing = c.get("/agents/no-such-agent")
    assert re.findall(r'<tr data-agent="([^"]+)"', listing) == [  # agent_id order
        "&lt;b&gt;agent-odd&lt;/b&gt;",
        "agent-chat",
        "agent-night",
        "agent-timer",
    ]
    timer = re.search(r'<tr data-agent="agent-timer">(.*?)</tr>', listing, re.S).group(1)
    assert "Europe/Berlin" in timer and "scheduled" in timer and "09:00" in timer
    assert "<b>agent-odd</b>" not in listing  # escaped, never markup
    assert re.findall(r'<tr data-agent="([^"]+)"', filtered) == ["agent-timer"]
    assert re.findall(r'<tr data-agent="([^"]+)"', off) == ["agent-night"]
    chat = re.search(r'<tr data-agent="agent-chat">(.*?)</tr>', listing, re.S).group(1)
    assert "succeeded" in chat  # its newest run: the charged one, made just now
    assert len(re.findall(r'<tr data-run="\d+"', journal)) == 5
    assert "retry" in journal and "running" in journal
    assert missing.status_code == 404
    assert MARKER not in listing + journal  # prompts are never shown


def test_agents_come_a_page_at_a_time_with_the_filter_kept_across_pages(conn, api_dsn):
    # 230 agents: the list shows 100 at a time in agent_id order, each page links the next
    # (keyset: the next page starts at the agent after the last shown), the filter and
    # the status travel with the link, and the last page has no next link
    names = [f"agent-p{g:03d}" for g in range(1, 230)]
    conn.execute(
        "select runlane_test.agent('agent-p' || lpad(g::text, 3, '0'), 'org-p') "
        "from generate_series(1, 229) as g"
    )
    conn.execute("select runlane_test.agent('agent-p1', 'org-p')")  # before agent-p100
    names = sorted(names + ["agent-p1"])
    conn.execute("update runlane.agents set enabled = false where agent_id like '%%7'")

    def walk(c: TestClient, url: str) -> list[list[str]]:
        pages = []
        while url:
            html = c.get(url).text
            pages.append(re.findall(r'<tr data-agent="([^"]+)"', html))
            following = re.search(r'id="next-page" rel="next" href="([^"]+)"', html)
            url = following and following.group(1).replace("&amp;", "&")
        return pages

    with client(api_dsn) as c:
        everyone = walk(c, "/agents")
        matching = walk(c, "/agents?q=-P1")
        switched_off = walk(c, "/agents?q=agent-p&status=off")
        unknown = c.get("/agents", params={"status": "<script>"})
    assert [len(p) for p in everyone] == [100, 100, 30]
    assert sum(everyone, []) == names
    assert [len(p) for p in matching] == [100, 1]  # agent-p1, agent-p100 .. agent-p199
    assert sum(matching, []) == [n for n in names if "-p1" in n]
    assert sum(switched_off, []) == [n for n in names if n.endswith("7")]
    # an unknown status filters nothing (and is never echoed as markup)
    assert unknown.status_code == 200 and "<script>" not in unknown.text
    assert len(re.findall(r"<tr data-agent=", unknown.text)) == 100


def test_run_page_timing_outputs_hidden_unless_asked_and_escaped(conn, api_dsn):
    run_id = seed(conn)["finished_run"]
    with client(api_dsn) as c:
        hidden = c.get(f"/runs/{run_id}").text
        assert c.get("/runs/999999").status_code == 404
        assert c.get("/runs", params={"id": "abc"}).status_code == 400
        assert (
            c.get("/runs", params={"id": str(run_id)}, follow_redirects=False).headers["location"]
            == f"/runs/{run_id}"
        )
    with client(api_dsn, show_content=True) as c:
        shown = c.get(f"/runs/{run_id}").text
    timing = dict(re.findall(r'data-key="([\w.]+)">([^<]*)<', hidden))
    assert timing == {
        "run.pre_run_wait_ms": "0 ms",
        "run.queue_wait_ms": "50 ms",
        "run.first_response_ms": "700 ms",
        "run.execution_wall_ms": "1.9 s",
        "run.total_ms": "2.0 s",
    }
    assert 'id="run-state" class="state succeeded">succeeded<' in hidden
    assert MARKER not in hidden and "characters hidden" in hidden
    assert f"hello {MARKER}" in shown
    assert "<script>alert(1)</script>" not in shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    assert 'id="stop"' not in shown  # no actions unless allowed


def test_a_number_in_the_address_is_ascii_digits_or_a_400_never_a_500(conn, api_dsn):
    """`²` is a digit to str.isdigit() and not to int(): every number the dashboard reads
    from a request (the run lookup's id, a run stream's ?after= and Last-Event-ID) is
    refused with 400 and a message when it is not a whole number in ASCII digits."""
    run_id = seed(conn)["finished_run"]
    events = f"/events/runs/{run_id}"
    with client(api_dsn, allow_actions=True) as c:
        for bad in ("²", "1²", "٣", "abc", "-1", "1.5", "0", "99999999999999999999"):
            lookup = c.get("/runs", params={"id": bad})
            assert lookup.status_code == 400, bad
            assert "positive whole number (digits 0-9)" in lookup.text
        for bad in ("²", "1²", "٣", "abc", "-1", "99999999999999999999"):
            after = c.get(events, params={"after": bad})
            assert after.status_code == 400, bad
            assert "whole number (digits 0-9)" in after.text
        # a header value is latin-1 on the wire: b"\xb2" is "²"
        for raw in (b"\xb2", b"7\xb2", b"x"):
            resumed = c.get(events, headers={"last-event-id": raw})
            assert resumed.status_code == 400, raw
        # good numbers still work: the finished run's stream ends with its end event
        ok = c.get(events, params={"after": "0"})
        assert ok.status_code == 200 and "event: end" in ok.text
        assert c.get(events, headers={"last-event-id": b"999"}).status_code == 200
        # ids beyond a bigint in the path are no run, not a database error
        huge = "9" * 20
        assert c.get(f"/events/runs/{huge}").status_code == 404
        assert c.post(f"/runs/{huge}/stop", data={"key": "x"}).status_code == 404


def test_stop_is_refused_without_actions_and_needs_the_page_key_with_them(conn, api_dsn):
    seed(conn)
    run_id = conn.execute(
        "select runlane_test.queued_run('agent-night', 'interactive', 'interactive')"
    ).fetchone()[0]
    with client(api_dsn) as c:
        assert 'id="stop"' not in c.get(f"/runs/{run_id}").text
        assert c.post(f"/runs/{run_id}/stop", data={"key": "x"}).status_code == 403
    assert conn.execute(
        "select state from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("queued",)
    with client(api_dsn, allow_actions=True) as c:
        page = c.get(f"/runs/{run_id}").text
        assert 'id="stop"' in page
        key = re.search(r'name="key" value="([^"]+)"', page).group(1)
        assert c.post(f"/runs/{run_id}/stop", data={"key": "forged"}).status_code == 403
        assert conn.execute(
            "select state from runlane.runs where run_id = %s", (run_id,)
        ).fetchone() == ("queued",)
        done = c.post(f"/runs/{run_id}/stop", data={"key": key}, follow_redirects=False)
        assert done.status_code == 303
    assert conn.execute(
        "select state, reason from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("canceled", "canceled")


def test_a_token_is_required_on_every_request_when_set(conn, api_dsn):
    seed(conn)
    with client(api_dsn, token="s3cret", loopback_only=False) as c:
        assert c.get("/").status_code == 401
        assert c.get("/events/overview").status_code == 401
        assert c.get("/", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/", headers={"authorization": "Bearer s3cret"}).status_code == 200
        visit = c.get("/agents?token=s3cret", follow_redirects=False)
        assert visit.status_code == 303 and visit.headers["location"] == "/agents"
        assert "httponly" in visit.headers["set-cookie"].lower()
        assert c.get("/agents").status_code == 200  # the cookie from the visit


def test_without_a_token_only_loopback_host_names_are_served(conn, api_dsn):
    with TestClient(create_app(api_dsn), base_url="http://evil.example") as c:
        assert c.get("/").status_code == 400  # a rebound name pointing at 127.0.0.1
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1")
    assert not is_loopback("dashboard.example")


@pytest.mark.timeout(90)
def test_a_dashboard_stops_however_soon_after_starting(conn, api_dsn):
    """Its shutdown once hung for ever (CI, after a page refused in milliseconds): the
    hub's refresher, cancelled in the pass that woke it, lost the cancellation inside
    Python 3.11's asyncio.wait_for and went on looping. 100 starts and stops, each
    with one request in between, must all end."""
    for attempt in range(100):
        with TestClient(create_app(api_dsn), base_url="http://evil.example") as c:
            time.sleep((attempt % 10) / 1000)  # stop at different points of its start
            assert c.get("/").status_code == 400


def test_a_wait_cancelled_as_its_event_is_set_is_cancelled():
    """The race itself, made certain: the event set and the waiter cancelled in one
    pass of the loop. asyncio.wait_for on 3.11 returns normally here."""

    async def race() -> str:
        event = asyncio.Event()
        waiter = asyncio.create_task(eventloop.wait_event(event, 10))
        await asyncio.sleep(0)  # the waiter now waits on the event
        event.set()
        waiter.cancel()
        try:
            await waiter
        except asyncio.CancelledError:
            return "cancelled"
        return "cancellation lost"

    assert asyncio.run(race()) == "cancelled"


def test_a_non_loopback_address_without_a_token_is_refused_before_binding(db_dsn):
    env = {k: v for k, v in __import__("os").environ.items() if k != "RUNLANE_DASHBOARD_TOKEN"}
    port = dashboard_helpers.free_port()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "runlane",
            "dashboard",
            "--dsn",
            db_dsn,
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env=env,
    )
    assert result.returncode == 2
    assert "not a loopback address" in result.stderr and "--token" in result.stderr
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)


def _events(response: httpx.Response):
    """(event, data) pairs of a server-sent event stream, as they arrive."""
    event, data = None, []
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line == "" and event:
            yield event, json.loads("\n".join(data))
            event, data = None, []


def test_a_real_dashboard_streams_the_overview_as_it_changes(conn, api_dsn, dashboards):
    """One process, its one listener: a published chat run reaches a watching browser's
    stream (and a second watcher's) without either asking again."""
    seed(conn)
    dash = dashboards(api_dsn)
    page = httpx.get(dash.url + "/")
    assert page.status_code == 200
    assert int(cells(page.text, "interactive")["queued"]) == 3
    with (
        httpx.Client(timeout=httpx.Timeout(DEADLINE)) as http,
        http.stream("GET", dash.url + "/events/overview") as first,
        http.stream("GET", dash.url + "/events/overview") as second,
    ):
        streams = [_events(first), _events(second)]
        for events in streams:
            name, data = next(events)
            assert name == "overview"
            assert {r["lane"]: r["queued"] for r in data["lanes"]}["interactive"] == 3
            assert len(data["chart"]["x"]) == 60
        started = time.monotonic()
        submit(conn, "agent-chat", "thread-live", "are you there?")
        for events in streams:
            for _name, data in events:
                if {r["lane"]: r["queued"] for r in data["lanes"]}["interactive"] == 4:
                    break
        waited = time.monotonic() - started
        # two browsers, one listener: the hub's LISTEN connection is the only one
        login = conninfo_to_dict(api_dsn)["user"]
        listening = conn.execute(
            "select count(*) from pg_stat_activity where usename = %s and query ilike 'listen%%'",
            (login,),
        ).fetchone()[0]
        assert listening == 1
    print(f"overview change reached two streams after {waited:.2f} s")


def test_run_page_shows_the_last_error_class_and_its_message_only_with_content(conn, api_dsn):
    """run_detail's error: the class always, the message (it can quote user content) only
    with --show-content."""
    seed(conn)
    run_id = conn.execute(
        "select runlane_test.timed_run('agent-chat', 'interactive', 'interactive', 'failed', "
        "now() - interval '1 minute', 10, null, 500, 'error')"
    ).fetchone()[0]
    conn.execute(
        "update runlane.runs set last_error = %s where run_id = %s",
        (f"ValueError: the model quoted {MARKER}", run_id),
    )
    with client(api_dsn) as c:
        hidden = c.get(f"/runs/{run_id}").text
    with client(api_dsn, show_content=True) as c:
        shown = c.get(f"/runs/{run_id}").text
    error = re.search(r'id="run-error">(.*?)</td>', hidden, re.S).group(1)
    assert error.startswith("ValueError") and "message hidden" in error
    assert MARKER not in hidden
    assert f"ValueError: the model quoted {MARKER}" in shown


def test_the_runs_and_workers_pages_escape_ids_and_take_any_filter_without_an_error(conn, api_dsn):
    seed(conn)
    conn.execute(
        "select runlane_test.timed_run('<b>agent-odd</b>', 'interactive', 'interactive', "
        "'failed', now() - interval '1 minute', 10, 20, 30)"
    )
    conn.execute("select runlane.register_worker('<i>w</i>', array['interactive'])")
    with client(api_dsn) as c:
        page = c.get("/runs").text
        assert "&lt;b&gt;agent-odd&lt;/b&gt;" in page and "<b>agent-odd</b>" not in page
        # unknown values read as no filter; a thread without its agent is dropped
        for query in ("state=stuck", "lane=fast", "thread=t-1", "state=&org=nobody", "agent="):
            response = c.get(f"/runs?{query}")
            assert response.status_code == 200, query
        assert "No run matches." in c.get("/runs?state=failed&org=nobody").text
        workers = c.get("/workers").text
        assert "&lt;i&gt;w&lt;/i&gt;" in workers and "<i>w</i>" not in workers
        assert c.get("/runs", params={"id": "abc"}).status_code == 400  # still a lookup
