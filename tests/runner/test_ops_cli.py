"""`runlane status`, `timing` and `journal` against a database with known runs: the
numbers come from the ops SQL views, the commands only render them (text or --json)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from runlane.cli import main


def _run(db_dsn: str, *args: str) -> str:
    result = CliRunner(env={"RUNLANE_TABLES": "plain"}).invoke(main, [*args, "--dsn", db_dsn])
    assert result.exit_code == 0, result.output
    return result.output


def _known_runs(conn) -> None:
    conn.execute("select runlane_test.agent('agent-o', 'org-o')")
    conn.execute(
        "update runlane.platform_settings set agent_max_concurrency = 3 where org_id = 'org-o'"
    )
    conn.execute("select runlane_test.timed_runs(now())")


def test_timing_json_has_the_known_distributions(conn, db_dsn):
    _known_runs(conn)
    data = json.loads(_run(db_dsn, "timing", "--since", "1h", "--json"))
    measures = {m["measure"]: m for m in data["measures"]}
    assert measures["first_response"] == {
        "measure": "first_response",
        "samples": 4,
        "p50_ms": 500,
        "p90_ms": 1500,
        "p99_ms": 1500,
        "max_ms": 1500,
    }
    assert (
        measures["total"]["samples"],
        measures["total"]["p50_ms"],
        measures["total"]["max_ms"],
    ) == (3, 2000, 4000)
    assert (measures["queue_wait"]["samples"], measures["queue_wait"]["p50_ms"]) == (4, 50)
    wider = json.loads(_run(db_dsn, "timing", "--since", "3 hours", "--json"))
    assert {m["measure"]: m["samples"] for m in wider["measures"]}["total"] == 4
    scheduled = json.loads(_run(db_dsn, "timing", "--trigger", "scheduled", "--json"))
    first = {m["measure"]: m for m in scheduled["measures"]}["first_response"]
    assert (first["samples"], first["p50_ms"]) == (1, 1500)


def test_timing_text_is_a_table_of_the_same_numbers(conn, db_dsn):
    _known_runs(conn)
    out = _run(db_dsn, "timing")
    line = next(li for li in out.splitlines() if li.startswith("first_response"))
    assert line.split() == ["first_response", "4", "500", "1500", "1500", "1500"]


def test_journal_lists_runs_and_skips_newest_first(conn, db_dsn):
    _known_runs(conn)
    data = json.loads(_run(db_dsn, "journal", "agent-o", "--json"))
    runs = data["runs"]
    assert [(r["trigger"], r["state"], r["reason"]) for r in runs[:3]] == [
        ("interactive", "running", None),
        ("manual", "skipped", "already_running"),
        ("scheduled", "failed", "iteration_cap"),
    ]
    assert len(runs) == 6
    created = [r["created_at"] for r in runs]
    assert created == sorted(created, reverse=True)
    out = _run(db_dsn, "journal", "agent-o", "--limit", "2")
    assert "already_running" in out and "iteration_cap" not in out


def test_journal_of_an_unknown_agent_is_a_one_line_rl008(db_dsn):
    result = CliRunner().invoke(main, ["journal", "nobody", "--dsn", db_dsn])
    assert result.exit_code == 2
    assert result.output.strip().startswith("RL008")


def test_status_counts_lanes_organizations_and_schedules(conn, db_dsn):
    _known_runs(conn)
    conn.execute("select runlane_test.queued_run('agent-o', 'interactive', 'interactive')")
    conn.execute(
        "select runlane_test.queued_run('agent-o', 'background', 'manual', "
        "now() + interval '1 hour')"
    )
    conn.execute("select runlane_test.owner('owner-ny', 'org-o', 'America/New_York')")
    conn.execute("select runlane_test.agent('agent-ny', 'org-o', null, 'owner-ny')")
    conn.execute(
        "update runlane.agents set schedule = 'daily at 09:00' where agent_id = 'agent-ny'"
    )
    data = json.loads(_run(db_dsn, "status", "--json"))
    lanes = {r["lane"]: r for r in data["lanes"]}
    assert (
        lanes["interactive"]["queued"],
        lanes["interactive"]["due"],
        lanes["interactive"]["running"],
    ) == (1, 1, 1)
    assert lanes["interactive"]["oldest_due_wait_ms"] >= 0
    assert (
        lanes["background"]["queued"],
        lanes["background"]["due"],
        lanes["background"]["running"],
    ) == (1, 0, 0)
    assert lanes["background"]["oldest_due_wait_ms"] is None
    assert data["organizations"] == [
        {
            "org_id": "org-o",
            "running_background": 0,
            "queued_background": 1,
            "agent_max_concurrency": 3,
        }
    ]
    ny = next(a for a in data["agents"] if a["agent_id"] == "agent-ny")
    assert (ny["timezone"], ny["status"]) == ("America/New_York", "scheduled")
    assert ny["next_run_local"].endswith(" 09:00")
    out = _run(db_dsn, "status")
    assert "America/New_York" in out and "agent_max_concurrency" in out


def test_timing_since_takes_units_and_names_the_forms_when_it_cannot(conn, db_dsn):
    _known_runs(conn)
    for since in ("30s", "5m", "2h", "1d", "1w", "2 days", "P1D"):
        data = json.loads(_run(db_dsn, "timing", "--since", since, "--json"))
        assert [m["measure"] for m in data["measures"]] == [
            "queue_wait",
            "first_response",
            "total",
        ], since
    for bad in ("5 parsecs", "-1h", "0s"):
        result = CliRunner().invoke(main, ["timing", "--since", bad, "--dsn", db_dsn])
        assert result.exit_code == 2, (bad, result.output)
        assert f"--since {bad!r} is not a positive duration: use 30s, 5m, 2h" in result.output
