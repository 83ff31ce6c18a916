"""The dashboard in a real browser: Debian's headless chromium driven by Selenium, against
real `runlane dashboard` processes and a real worker. Few tests, each waiting on
conditions (never on time): the overview shows the seeded counts, draws its charts and
follows a change live; a run page shows outputs as they arrive; the Stop button stops a
running run when actions are allowed and is absent otherwise.

The overview's screenshot is written to a temporary file on every run and to
docs/dashboard.png (the README's picture) when UPDATE_SCREENSHOT=1.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import dashboard_helpers
import pytest
import worker_helpers
from dashboard_helpers import SEEDED_LANES, seed
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from worker_helpers import DEADLINE, submit

pytestmark = pytest.mark.browser

api_dsn = dashboard_helpers.api_dsn  # fixtures
dashboards = dashboard_helpers.dashboards
workers = worker_helpers.workers

DOCS = Path(__file__).parent.parent.parent / "docs"
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def _ensure_chromium() -> None:
    """Debian's chromium and chromium-driver, installed when missing (we are root on the
    test machines; elsewhere say what to install). Never a browser download of its own."""
    if Path(CHROMIUM).exists() and Path(DRIVER).exists():
        return
    if os.geteuid() != 0:
        pytest.fail("install Debian's chromium and chromium-driver for the browser tests")
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"],
        check=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )


@pytest.fixture(scope="module")
def browser():
    _ensure_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1360,1100",
        "--hide-scrollbars",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(DEADLINE)
    yield driver
    driver.quit()


def wait_for(driver, condition, what: str):
    def check(d):
        try:
            return condition(d)
        except StaleElementReferenceException:
            return False

    return WebDriverWait(driver, DEADLINE, poll_frequency=0.05).until(check, message=what)


def text_of(driver, css: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, css).text


def lane_cell(driver, lane: str, field: str) -> str:
    return text_of(driver, f'#lanes tr[data-lane="{lane}"] td[data-field="{field}"]')


def _history(conn) -> None:
    """An hour of finished chat and scheduled runs, for charts with something to show."""
    conn.execute("""
        select runlane_test.timed_run(
            case when i % 3 = 0 then 'agent-timer' else '<b>agent-odd</b>' end,
            case when i % 3 = 0 then 'background' else 'interactive' end,
            case when i % 3 = 0 then 'scheduled' else 'interactive' end,
            'succeeded', now() - (i * interval '40 seconds') - interval '1 minute',
            (20 + i % 7 * 30)::int, (400 + (i * 37) % 900 + (i % 11) * 120)::int,
            (3000 + i % 5 * 500)::int)
        from generate_series(1, 85) as i
        where i % 3 <> 0 or i % 2 = 0
    """)
    conn.execute("""
        select runlane_test.timed_run('agent-chat', 'interactive', 'interactive', 'succeeded',
            now() - (i * interval '3 minutes') - interval '30 seconds', 45000 + i * 1000,
            45500 + i * 1000, 47000 + i * 1000)
        from generate_series(1, 12) as i
    """)


def test_the_overview_shows_the_seeded_counts_draws_its_charts_and_follows_a_change(
    conn, api_dsn, dashboards, browser, tmp_path
):
    seed(conn)
    _history(conn)
    dash = dashboards(api_dsn)
    browser.get(dash.url + "/")
    wait_for(browser, lambda d: text_of(d, "#live") == "live", "the live stream connected")
    for lane, counts in SEEDED_LANES.items():
        for field, n in counts.items():
            assert lane_cell(browser, lane, field) == str(n), (lane, field)
    assert browser.find_element(By.ID, "delay").is_displayed()
    assert text_of(browser, "#delay-runs") == "2"
    wait_for(
        browser,
        lambda d: (
            d.find_elements(By.CSS_SELECTOR, "#chart-latency canvas")
            and d.find_elements(By.CSS_SELECTOR, "#chart-depth canvas")
        ),
        "both charts drawn",
    )
    legend = text_of(browser, "#chart-latency")
    assert "interactive p99" in legend and "background p50" in legend
    wait_for(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-failures canvas"), "failures"
    )
    assert "reaped" in text_of(browser, "#chart-failures")

    shot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("UPDATE_SCREENSHOT") == "1":
        shutil.copy(shot, DOCS / "dashboard.png")

    submit(conn, "agent-chat", "thread-browser", "one more")
    wait_for(
        browser,
        lambda d: lane_cell(d, "interactive", "queued") == "4",
        "the new chat run counted without a reload",
    )


def _running_stream_run(conn, workers, chunks: int, delay: float) -> int:
    conn.execute("select runlane_test.agent('agent-stream', 'org-stream')")
    conn.execute(
        "update runlane.platform_settings set agent_iteration_cap = 1000000 "
        "where org_id = 'org-stream'"
    )  # one step per chunk: never the cap here
    workers(
        "--agent",
        "stream_agent:agent",
        lanes=("interactive",),
        env={"STREAM_AGENT_CHUNKS": str(chunks), "STREAM_AGENT_DELAY": str(delay)},
    )
    run_id = submit(conn, "agent-stream", "thread-stream", "stream please")
    worker_helpers.wait_until(
        lambda: (
            conn.execute(
                "select count(*) from runlane.run_outputs where run_id = %s", (run_id,)
            ).fetchone()[0]
            >= 1
        ),
        what="the run's first output",
    )
    return run_id


def test_a_run_page_shows_outputs_arriving_live(
    conn, db_dsn, api_dsn, dashboards, workers, browser
):
    chunks = 40
    run_id = _running_stream_run(conn, workers, chunks, 0.25)
    dash = dashboards(api_dsn, "--show-content")
    browser.get(f"{dash.url}/runs/{run_id}")
    first = len(browser.find_elements(By.CSS_SELECTOR, "#outputs li"))
    assert 1 <= first < chunks, "the page was rendered while the run was still writing"
    wait_for(
        browser,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#outputs li")) == chunks,
        "every chunk shown",
    )
    wait_for(browser, lambda d: text_of(d, "#run-state") == "succeeded", "the run's end shown")
    bodies = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#outputs li .body")]
    assert bodies == [f"<{n:05d}>" for n in range(chunks)]  # text, in order, each once
    assert browser.find_element(By.ID, "stream-end").is_displayed()
    assert not browser.find_elements(By.ID, "stop")  # no actions unless allowed


def test_the_stop_button_stops_a_running_run_only_when_actions_are_allowed(
    conn, api_dsn, dashboards, workers, browser
):
    run_id = _running_stream_run(conn, workers, 100_000, 0.2)
    plain = dashboards(api_dsn)
    browser.get(f"{plain.url}/runs/{run_id}")
    wait_for(browser, lambda d: text_of(d, "#live") == "live", "the run stream connected")
    assert not browser.find_elements(By.ID, "stop")
    assert browser.find_elements(By.CSS_SELECTOR, "#outputs li")  # hidden text, but listed
    assert "characters hidden" in text_of(browser, "#outputs")

    acting = dashboards(api_dsn, "--allow-actions")
    browser.get(f"{acting.url}/runs/{run_id}")
    assert text_of(browser, "#run-state") == "running"
    browser.find_element(By.CSS_SELECTOR, "#stop button").click()
    worker_helpers.wait_until(
        lambda: (
            conn.execute("select state from runlane.runs where run_id = %s", (run_id,)).fetchone()[
                0
            ]
            == "canceled"
        ),
        what="the run canceled",
    )
    wait_for(browser, lambda d: text_of(d, "#run-state") == "canceled", "the page shows it")
    assert not browser.find_element(By.ID, "stop").is_displayed()


def rows_of(driver, table: str, attribute: str) -> list[str]:
    return [
        e.get_attribute(attribute)
        for e in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr[{attribute}]")
    ]


def test_the_runs_page_filters_by_state_lane_organization_and_agent(
    conn, api_dsn, dashboards, browser
):
    seed(conn)
    ago = "select runlane_test.timed_run(%s, %s, %s, %s, now() - %s::interval, 10, 20, 30)"
    failed_chat = conn.execute(
        ago, ("agent-chat", "interactive", "interactive", "failed", "5 minutes")
    ).fetchone()[0]
    failed_timer = conn.execute(
        ago, ("agent-timer", "background", "scheduled", "failed", "2 minutes")
    ).fetchone()[0]
    conn.execute(ago, ("agent-chat", "interactive", "interactive", "failed", "3 hours"))
    queued = [
        r
        for (r,) in conn.execute(
            "select run_id from runlane.runs where state = 'queued' order by created_at, run_id"
        )
    ]
    dash = dashboards(api_dsn)

    browser.get(dash.url + "/runs")  # failed in the last hour by default, newest first
    assert rows_of(browser, "runs", "data-run") == [str(failed_timer), str(failed_chat)]

    Select(browser.find_element(By.NAME, "state")).select_by_value("queued")
    browser.find_element(By.CSS_SELECTOR, "form.filter button").click()
    wait_for(browser, lambda d: "state=queued" in d.current_url, "the queued runs asked for")
    assert rows_of(browser, "runs", "data-run") == [str(r) for r in queued]  # oldest first
    assert "oldest first" in text_of(browser, "#runs-order")

    Select(browser.find_element(By.NAME, "lane")).select_by_value("background")
    browser.find_element(By.CSS_SELECTOR, "form.filter button").click()
    wait_for(browser, lambda d: "lane=background" in d.current_url, "one lane asked for")
    background = conn.execute(
        "select run_id from runlane.runs where state = 'queued' and lane = 'background'"
    ).fetchall()
    assert rows_of(browser, "runs", "data-run") == [str(r) for (r,) in background]

    browser.get(dash.url + "/runs?state=failed&org=org-two")
    assert rows_of(browser, "runs", "data-run") == [str(failed_timer)]
    browser.get(dash.url + "/runs?state=failed&agent=agent-chat")
    assert rows_of(browser, "runs", "data-run") == [str(failed_chat)]
    # an agent's link opens its page
    browser.find_element(By.CSS_SELECTOR, f'#runs tr[data-run="{failed_chat}"] td a').click()
    wait_for(browser, lambda d: d.current_url.endswith("/agents/agent-chat"), "the agent page")


def test_a_killed_workers_run_reads_stale_within_a_heartbeat_long_before_its_lease_expires(
    conn, api_dsn, dashboards, workers, browser
):
    """A 45 s lease: the worker beats every 15 s, so its run reads stale at most 22.5 s
    after its last beat, and reap_stale could take it only at 45 s."""
    conn.execute("select runlane_test.agent('agent-stream', 'org-stream')")
    conn.execute(
        "update runlane.platform_settings set agent_iteration_cap = 1000000 "
        "where org_id = 'org-stream'"
    )
    worker = workers(
        "--agent",
        "stream_agent:agent",
        "--lease",
        "45",
        lanes=("interactive",),
        env={"STREAM_AGENT_CHUNKS": "100000", "STREAM_AGENT_DELAY": "0.2"},
    )
    run_id = submit(conn, "agent-stream", "thread-stream", "stream please")
    worker_helpers.wait_until(
        lambda: worker_helpers.run_state(conn, run_id) == "running", what="the run running"
    )
    dash = dashboards(api_dsn)
    row = f'#runs tr[data-run="{run_id}"]'

    browser.get(dash.url + "/runs?state=running")
    assert text_of(browser, f'{row} [data-field="health"]') == "healthy"
    assert text_of(browser, f'{row} [data-field="worker"]') == worker.worker_id
    browser.get(dash.url + "/workers")
    me = f'#workers tr[data-worker="{worker.worker_id}"]'
    assert text_of(browser, f'{me} [data-field="status"]') == "alive"
    assert text_of(browser, f'{me} [data-field="running"]') == "1"
    assert text_of(browser, f'{me} [data-field="lanes"]') == "interactive"

    worker.signal(signal.SIGKILL)
    worker.wait_exit()

    def stale(d) -> bool:
        d.get(dash.url + "/runs?state=running")
        return d.find_element(By.CSS_SELECTOR, f'{row} [data-field="health"]').text == "stale"

    wait_for(browser, stale, "the killed worker's run shown stale")
    # seen before the lease ran out: still running, nobody could have reaped it yet
    state, left = conn.execute(
        "select state, lease_expires_at > now() from runlane.runs where run_id = %s", (run_id,)
    ).fetchone()
    assert (state, left) == ("running", True)
    browser.get(dash.url + "/workers")
    assert text_of(browser, f'{me} [data-field="status"]') == "stale"
    assert text_of(browser, f'{me} [data-field="stale"]') == "1"


def test_the_run_page_links_agent_organization_and_thread_and_joins_the_reply(
    conn, api_dsn, dashboards, browser
):
    conn.execute("select runlane_test.agent('agent-reply', 'org-reply')")
    run_id = submit(conn, "agent-reply", "thread-reply", "hello")
    fence = conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()[0]
    for kind, body in [("text", "Hello, "), ("reasoning", "hidden"), ("text", "<b>world</b>")]:
        conn.execute("select runlane.append_output(%s, %s, %s, %s)", (run_id, fence, kind, body))
    conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence))
    dash = dashboards(api_dsn, "--show-content")

    browser.get(f"{dash.url}/runs/{run_id}")
    assert text_of(browser, "#reply") == "Hello, <b>world</b>"  # one text, never markup
    assert text_of(browser, "#run-created") != "–"
    browser.find_element(By.ID, "run-thread").click()
    wait_for(browser, lambda d: "thread=thread-reply" in d.current_url, "the thread's runs")
    assert rows_of(browser, "runs", "data-run") == [str(run_id)]
    browser.get(f"{dash.url}/runs/{run_id}")
    browser.find_element(By.ID, "run-org").click()
    wait_for(browser, lambda d: d.current_url.endswith("/orgs#org-org-reply"), "the organization")
    assert browser.find_element(By.ID, "org-org-reply").text == "org-reply"
    browser.get(f"{dash.url}/runs/{run_id}")
    browser.find_element(By.ID, "run-agent").click()
    wait_for(browser, lambda d: d.current_url.endswith("/agents/agent-reply"), "the agent page")

    hidden = dashboards(api_dsn)
    browser.get(f"{hidden.url}/runs/{run_id}")
    assert text_of(browser, "#reply") == "[19 characters in 2 output(s) hidden]"
