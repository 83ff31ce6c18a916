"""runlane.worker.config: the derived settings a worker fixes once at start."""

from __future__ import annotations

from runlane.agents.echo import agent
from runlane.worker.config import WorkerConfig


def test_the_largest_claim_page_defaults_to_ten_pages_and_never_undercuts_the_first():
    assert (
        WorkerConfig(dsn="", lanes=["interactive"], agent=agent, claim_batch=7).claim_batch_max
        == 70
    )
    assert (
        WorkerConfig(
            dsn="", lanes=["interactive"], agent=agent, claim_batch=20, claim_batch_max=5
        ).claim_batch_max
        == 20
    )


def test_a_finish_batch_stays_between_one_run_and_a_full_claim_page(monkeypatch):
    assert WorkerConfig(dsn="", lanes=["x"], agent=agent, finish_batch=0).finish_batch == 1
    assert WorkerConfig(dsn="", lanes=["x"], agent=agent, finish_batch=500).finish_batch == 100
    monkeypatch.delenv("RUNLANE_WORKER_FINISH_BATCH", raising=False)
    default = WorkerConfig(dsn="", lanes=["x"], agent=agent)
    assert default.finish_batch == default.claim_batch_max  # a full page in one call
    monkeypatch.setenv("RUNLANE_WORKER_FINISH_BATCH", "7")
    monkeypatch.setenv("RUNLANE_WORKER_FINISH_WINDOW", "0.25")
    config = WorkerConfig(dsn="", lanes=["x"], agent=agent)
    assert (config.finish_batch, config.finish_window) == (7, 0.25)


def test_a_worker_without_an_id_gets_a_unique_one_and_its_application_name_fits():
    a = WorkerConfig(dsn="", lanes=["x"], agent=agent)
    b = WorkerConfig(dsn="", lanes=["x"], agent=agent)
    assert a.worker_id and a.worker_id != b.worker_id
    long = WorkerConfig(dsn="", lanes=["x"], agent=agent, worker_id="w" * 100)
    assert long.application_name.startswith("runlane-worker:w")
    assert len(long.application_name) == 63  # PostgreSQL's limit for application_name


def test_the_default_bound_leaves_room_for_a_full_page_beside_one_in_flight():
    """With one organization's backlog, a worker claims its next page while the last one
    still runs or finishes; a bound of one page cut each claim to what the last finish
    freed, about half a page (each run then paid twice a claim's fixed cost)."""
    config = WorkerConfig(dsn="", lanes=["x"], agent=agent)
    assert config.max_per_org >= 2 * config.claim_batch_max


def test_the_worker_command_and_the_config_share_the_default_bound():
    from runlane.cli import worker_cmd

    option = next(p for p in worker_cmd.params if p.name == "max_per_org")
    assert option.default == WorkerConfig(dsn="", lanes=["x"], agent=agent).max_per_org


def test_the_worker_command_and_the_config_share_the_fast_scan_defaults():
    from runlane.cli import worker_cmd

    config = WorkerConfig(dsn="", lanes=["x"], agent=agent)
    options = {p.name: p for p in worker_cmd.params}
    assert options["fast_scan_interval"].default == config.fast_scan_interval == 0.1
    assert options["notify_queue_warn"].default == config.fast_scan_from == 0.25
    assert options["scan_only"].is_flag and config.scan_only is False
    assert options["scan_only"].envvar == "RUNLANE_WORKER_SCAN_ONLY"


def test_a_scan_only_worker_does_not_listen():
    config = WorkerConfig(dsn="", lanes=["x"], agent=agent, scan_only=True)
    assert config.listen is False
