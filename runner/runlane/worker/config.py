"""The worker's settings (`runlane worker`'s options, embedded mode's arguments).

Plain values and their defaults; nothing here talks to the database. Derived values are
fixed once, in __post_init__: the largest claim page, the finish batch kept within 1..100
runs (a full claim page), and a worker id when none is given.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..agents import Agent
from ..maintenance import MaintenanceConfig

HANDLER_NAME = re.compile(r"[a-z0-9_.-]{1,64}")


@dataclass
class WorkerConfig:
    dsn: str
    lanes: list[str]
    # The agent of handler 'default' (`--agent module:attr`); agents maps each handler
    # this worker serves to its agent (`--agent NAME=module:attr`, repeatable). The worker
    # claims only runs whose agent's handler is in agents; none given: {'default': agent}.
    agent: Agent | None
    agents: dict[str, Agent] = field(default_factory=dict)
    worker_id: str = ""
    shutdown_grace: float = 30.0
    memory_buffer_mb: int = 64
    memory_probe: str | None = None
    lease: float = 60.0
    scan_interval: float = 5.0
    # While notifications cannot be counted on (the NOTIFY queue at least fast_scan_from
    # full, or scan_only), each lane scans every fast_scan_interval seconds instead
    # (worker/scan_mode.py): chat's first response then stays within a fraction of a
    # second with no notification at all.
    fast_scan_interval: float = 0.1
    fast_scan_from: float = 0.25
    # No LISTEN, no LISTEN proof at startup: the lanes always scan at fast_scan_interval
    # (--scan-only, for where LISTEN cannot work, e.g. a transaction-pooled PgBouncer).
    scan_only: bool = False
    claim_batch: int = 10
    claim_batch_max: int = 0  # 0: 10 x claim_batch; pages grow while they come back full
    max_pages: int = 50
    pool_size: int = 10
    # At most this many runs of one organization in flight on this worker while another
    # organization within its room has runs waiting (claim_runs reads it as the session
    # setting runlane.max_per_org of the claim connections, work-conserving): one
    # organization's burst leaves the others the first places, and a lone organization is
    # limited by memory admission alone. 0: no bound. Twice the largest claim page by
    # default, so with a strict bound a one-organization backlog is still claimed in full
    # pages while the last page runs or finishes (a bound of one page cuts every claim to
    # what the last finish freed, about half a page: durable_compare).
    max_per_org: int = 200
    # The bound binds always (runlane.max_per_org_mode = strict), a lone organization
    # included: for a worker whose limit is not memory (a shared connection pool, a
    # CPU-bound agent), at the cost of runs left queued while the worker has room.
    max_per_org_strict: bool = False
    admission_retry: float = 0.5
    maintenance: MaintenanceConfig | None = field(default_factory=MaintenanceConfig)
    # False in embedded mode: no LISTEN connection; whoever commits a run in the same
    # process calls Worker.notify(lane), and every run that ends wakes the lanes (what
    # the database would have announced: follow-up runs, a freed computer).
    listen: bool = True
    # A runlane.metrics.Metrics: fed every timing row, refreshed from the database.
    metrics: Any = None
    # Finishes of runs ending within finish_window seconds of each other go to the
    # database as one finish_runs call of at most finish_batch runs (1: one call per run),
    # at most 100: a full claim page in one call (two calls of 50 cost a 4-worker drain
    # 15 % more database CPU per run: durable_compare). A batch that does not finish together
    # goes run by run, which finish_runs takes 60 runs at a time: the finisher then sends
    # it again in halves. Defaults from RUNLANE_WORKER_FINISH_WINDOW /
    # RUNLANE_WORKER_FINISH_BATCH.
    finish_window: float = field(
        default_factory=lambda: float(os.environ.get("RUNLANE_WORKER_FINISH_WINDOW", "0.002"))
    )
    finish_batch: int = field(
        default_factory=lambda: int(os.environ.get("RUNLANE_WORKER_FINISH_BATCH", "100"))
    )
    # Outputs emitted (ctx.emit) within output_window seconds go to the database together:
    # one append_outputs call, one commit, per lane for every run's pending outputs
    # (worker/output_batcher.py). An attempt's first visible output goes at once. 0: no
    # wait; each call carries what was emitted while the last one was on the wire.
    output_window: float = 0.02

    def __post_init__(self) -> None:
        if not self.agents:
            if self.agent is None:
                raise ValueError("a worker needs an agent (agent or agents)")
            self.agents = {"default": self.agent}
        for name in self.agents:
            if not HANDLER_NAME.fullmatch(name):
                raise ValueError(
                    f"handler {name!r} must be 1-64 characters of a-z 0-9 _ . - "
                    "(as runlane.agents.handler)"
                )
        if self.agent is None:
            self.agent = self.agents.get("default")
        if self.claim_batch_max <= 0:
            self.claim_batch_max = 10 * self.claim_batch
        self.claim_batch_max = max(self.claim_batch_max, self.claim_batch)
        self.finish_batch = max(1, min(self.finish_batch, 100))
        if not 0 <= self.output_window <= 10:
            raise ValueError("output_window must be 0 to 10 seconds")
        if self.fast_scan_interval <= 0:
            raise ValueError("fast_scan_interval must be above 0 seconds")
        if self.scan_only:
            self.listen = False
        if not self.worker_id:
            self.worker_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    @property
    def handlers(self) -> list[str]:
        """The handlers this worker serves, sorted (the claim's and the registry's)."""
        return sorted(self.agents)

    @property
    def application_name(self) -> str:
        return f"runlane-worker:{self.worker_id}"[:63]
