"""`runlane worker`: the runner's process, split into parts named for their one job.

`serve(config)` runs a `Worker` (process.py) until SIGTERM/SIGINT.
"""

from .process import (
    CHECKPOINT_WITH_OUTPUTS,
    FINISH_RUNS,
    FINISH_WITH_OUTPUTS,
    RUN_MESSAGES_MANY,
    Worker,
    WorkerConfig,
    is_resendable,
    outputs_params,
    pg_array,
    serve,
)

__all__ = ["CHECKPOINT_WITH_OUTPUTS", "FINISH_RUNS", "FINISH_WITH_OUTPUTS", "RUN_MESSAGES_MANY",
           "Worker", "WorkerConfig", "is_resendable", "outputs_params", "pg_array", "serve"]
