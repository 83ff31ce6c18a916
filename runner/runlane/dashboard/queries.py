"""The dashboard's reads and its one write, each a call of a runlane function that
runlane_api may execute (sql/functions/ops, dispatch, outputs, timing): never a table."""

from __future__ import annotations

# lane_status and queue_delay_status in one read of the queue (the overview and the hub's
# live round): each lane's counts and its part of the queue-delay warning.
OVERVIEW = "select * from runlane.lane_overview(p_threshold => %(threshold)s::interval)"
# The charts; `queued` is lane_overview's queued column read in the same snapshot (or
# None): the queue before the window is then not counted a second time.
MINUTES = (
    "select * from runlane.lane_minutes(p_since => %(since)s::interval, "
    "p_queued => %(queued)s::int[])"
)
# Handlers with queued runs that no live worker serves (the overview's warning).
UNSERVED = "select * from runlane.unserved_handlers()"
ORGS = "select * from runlane.org_status()"
OWNERS = "select * from runlane.owner_spend()"
# One page of agents (keyset on agent_id: the page from `from`), filtered in the database,
# so a page costs what its agents cost however many there are.
AGENT_PAGE = (
    "select * from runlane.agent_page(p_from => %(from)s::text, "
    "p_limit => %(limit)s::int, p_match => %(match)s::text, "
    "p_status => %(status)s::text)"
)
JOURNAL = (
    "select * from runlane.agent_journal(p_agent_id => %(agent)s::text, p_limit => %(limit)s::int)"
)
RUN_STATUS = "select * from runlane.run_status(p_run_id => %(run)s::bigint)"
RUN_TIMING = "select runlane.run_timing(p_run_id => %(run)s::bigint) as timing"
# The last failed attempt's error (class, and message: shown only with --show-content, as
# it can quote user content) and the output counts, from run_detail.
RUN_DETAIL = (
    "select d.agent_id, d.org_id, d.created_at, d.error_class, d.error, d.visible_outputs, "
    "d.outputs, d.max_attempts from runlane.run_detail(p_run_id => %(run)s::bigint) as d"
)
# The run's thread and its reply joined as a person reads it (shown with --show-content).
RUN_REPLY = "select * from runlane.run_reply(p_run_id => %(run)s::bigint)"
# The runs page: one state (or all), filtered, in the order that state is read, with a
# running run's worker, heartbeat age and health.
RUNS_PAGE = (
    "select * from runlane.runs_page(p_state => %(state)s::text, p_lane => %(lane)s::text, "
    "p_org_id => %(org)s::text, p_agent_id => %(agent)s::text, "
    "p_thread_id => %(thread)s::text, p_limit => %(limit)s::int)"
)
WORKERS = "select * from runlane.workers_page()"
FAILURES = "select * from runlane.failure_minutes(p_since => %(since)s::interval)"
OUTPUTS = (
    "select o.output_id, o.attempt, o.kind, o.body, o.created_at "
    "from runlane.outputs_since(p_run_id => %(run)s::bigint, "
    "p_after_output_id => %(after)s::bigint, p_limit => %(limit)s::int) as o"
)
STREAM_TOKEN = "select runlane.stream_token(p_run_id => %(run)s::bigint) as token"
WATCHED = (
    "select s.* from unnest(%(runs)s::bigint[]) as w (run_id) "
    "cross join lateral runlane.run_status(p_run_id => w.run_id) as s"
)
CANCEL = "select runlane.cancel_run(p_run_id => %(run)s::bigint) as state"
