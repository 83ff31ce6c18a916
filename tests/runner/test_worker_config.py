"""runlane.worker.config: the derived settings a worker fixes once at start."""

from __future__ import annotations

from runlane.agents.echo import agent
from runlane.worker.config import WorkerConfig


def test_the_largest_claim_page_defaults_to_ten_pages_and_never_undercuts_the_first():
    assert WorkerConfig(dsn="", lanes=["interactive"], agent=agent,
                        claim_batch=7).claim_batch_max == 70
    assert WorkerConfig(dsn="", lanes=["interactive"], agent=agent,
                        claim_batch=20, claim_batch_max=5).claim_batch_max == 20


def test_a_finish_batch_stays_between_one_and_sixty_runs(monkeypatch):
    assert WorkerConfig(dsn="", lanes=["x"], agent=agent, finish_batch=0).finish_batch == 1
    assert WorkerConfig(dsn="", lanes=["x"], agent=agent, finish_batch=500).finish_batch == 60
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
