"""`runlane worker`: durable dispatch of agent runs, one asyncio process in small parts.

Each part has one job and lives in a module named for it (as River splits its client):

- `process`    the Worker: wires the parts, starts them, stops and drains at a signal;
               `serve(config)` runs one.
- `config`     WorkerConfig: the settings and their defaults.
- `db`         one connection pool per lane and the resend rule (a statement is sent
               again only when the server cannot have applied it).
- `listener`   one LISTEN connection on `runlane_runs`: a hint marks its lane for one more
               pass; a Stop hint goes to the supervisor.
- `dispatcher` one loop per lane: scan timer, passes, bounded claim pages (claim_runs on
               the lane's own connection), memory admission, max_per_org.
- `supervisor` every claimed run: heartbeat (its ownership), agent steps, Stop, the
               iteration cap, drain and release at shutdown.
- `run_handle` one run as its agent sees it: fenced, numbered writes, charges, messages.
- `finisher`   how an attempt's end is written: finishes batched into one finish_runs
               call, retry_run, release_run, a stopped run's canceled finish.
- `registry`   the worker's row in runlane.workers, for operators.
Maintenance passes (runlane.maintenance) and metrics (runlane.metrics) run beside them.

The flow: listener or scan timer -> dispatcher (claim) -> supervisor (agent steps through
its run handle) -> finisher. Every rule about which run may start, who owns it and what
a write may change is the database's; the worker only calls its functions.
"""

from .config import WorkerConfig
from .db import is_resendable, pg_array
from .dispatcher import RUN_MESSAGES_MANY
from .finisher import FINISH_RUNS, FINISH_WITH_OUTPUTS
from .process import Worker, serve
from .run_handle import CHECKPOINT_WITH_OUTPUTS, outputs_params

__all__ = [
    "CHECKPOINT_WITH_OUTPUTS",
    "FINISH_RUNS",
    "FINISH_WITH_OUTPUTS",
    "RUN_MESSAGES_MANY",
    "Worker",
    "WorkerConfig",
    "is_resendable",
    "outputs_params",
    "pg_array",
    "serve",
]
