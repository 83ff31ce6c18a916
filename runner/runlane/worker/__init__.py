"""`runlane worker`: the runner's process, split into parts named for their one job.

`serve(config)` runs a `Worker` (process.py) until SIGTERM/SIGINT.
"""

from .config import WorkerConfig
from .db import is_resendable, pg_array
from .dispatcher import RUN_MESSAGES_MANY
from .finisher import FINISH_RUNS, FINISH_WITH_OUTPUTS
from .process import Worker, serve
from .run_handle import CHECKPOINT_WITH_OUTPUTS, outputs_params

__all__ = ["CHECKPOINT_WITH_OUTPUTS", "FINISH_RUNS", "FINISH_WITH_OUTPUTS", "RUN_MESSAGES_MANY",
           "Worker", "WorkerConfig", "is_resendable", "outputs_params", "pg_array", "serve"]
