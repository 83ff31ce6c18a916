"""The pgTAP contract files on a Citus cluster: a coordinator and two worker nodes on
loopback, the schema distributed by `runlane migrate --citus`, each file run on a worker
node's session as a worker or an API caller runs there.

The subset is every file of the directories that pin claims, fences, computer leases,
caps, chat coalescing, held messages, gates, budgets, schedules, tenants, the worker's
writes, maintenance, erasure and the operator views (CONTRACT_DIRECTORIES), except those
listed in NOT_ON_CITUS under the reason they cannot run there. A new file in those
directories runs on the cluster unless it is listed, so each one is decided.

One worker node holds every shard of this database (the other holds the reference
tables only, and takes every write to them): a claim takes the organizations of the node
it runs on, and the files name their organizations freely."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from conftest import load_test_fixtures
from pytest_pgtap.pgtap import Runner
from test_citus_coordinator import CITUS, cluster_database

from runlane.citus import migrate_citus
from runlane.pgcluster import LocalCluster

SQL_TESTS = Path(__file__).parent.parent / "sql"
CONTRACT_DIRECTORIES = (
    "dispatch",
    "worker",
    "runner",
    "outputs",
    "schedules",
    "budget",
    "tenants",
    "maintenance",
    "manage",
    "security",
    "erase",
    "notify",
    "ops",
    "timing",
)

# Files of those directories that do not run on the distributed schema, by reason. Each
# reason is the file's own, not runlane's: what the file pins is covered on the cluster
# by tests/runner/test_citus_coordinator.py where the reason names it.
NOT_ON_CITUS = {
    # One server's plan: the index a read takes, how many statements, updates, row writes
    # or advisory locks a call costs there. Citus plans each statement for its shards.
    "pins a plain server's plan or statement count": [
        "dispatch/test_claim_runs__a_backlog_skips_the_idle_read.sql",
        "dispatch/test_claim_runs__an_empty_keyed_claim_reads_its_index.sql",
        "dispatch/test_claim_runs__handlers.sql",
        "dispatch/test_claim_runs__skipping_the_window_keeps_the_order.sql",
        "dispatch/test_claim_runs__stays_on_its_index_after_a_drain.sql",
        "dispatch/test_submit_message__created_writes_each_row_once.sql",
        "dispatch/test_submit_message__finds_the_thread_run_by_its_key.sql",
        "dispatch/test_submit_message__steering_locks_its_run_by_key.sql",
        "dispatch/test_thread_lock__row.sql",
        "runner/test_run_messages_many__reads_only_its_runs.sql",
        "ops/test__agent_runs_newest_first__same_as_a_sort.sql",
        "ops/test_agent_last_runs__one_index_entry_per_agent.sql",
    ],
    # On a distributed schema finish_runs goes run by run (a batch's statements read many
    # organizations' rows, which Citus cannot lock together), at most 60 runs a call.
    "finishes a batch together in one update": [
        "runner/test_finish_runs__one_update_same_results.sql",
        "runner/test_finish_runs__run_by_run_at_most_sixty.sql",
        "runner/test_finish_runs__sequenced_finish_one_update.sql",
        "runner/test_finish_runs__together_on_computers.sql",
        "runner/test_finish_runs__together_same_rows.sql",
    ],
    # A worker node deletes its own receipts unused for a day at its first keyed claim.
    "purges runlane.claim_receipts": [
        "maintenance/test_purge_stale_claim_receipts__only_long_gone_workers.sql",
    ],
    # A worker node learns a login from `runlane migrate --citus` on the coordinator
    # (test_a_foreign_id_costs_a_login_held_to_one_organization_what_an_unknown_one_does).
    "creates a login inside its transaction": [
        "dispatch/test_send_message__another_organization_is_unknown.sql",
        "outputs/test_outputs_since_many__another_organization_gives_no_row.sql",
        "security/test_get_agent_message_status__another_organization_is_unknown.sql",
    ],
    # lane_minutes answers 0A000 there unless an organization is named.
    "reads lane_minutes across organizations": [
        "ops/test_lane_minutes__queue_depth_and_first_response.sql",
        "ops/test_lane_minutes__queue_depth_by_definition.sql",
        "ops/test_lane_minutes__queue_read_once.sql",
        "ops/test_lane_minutes__queued_given.sql",
        "ops/test_lane_status__queue_read_on_its_index.sql",
    ],
    # The file checks that each row's org_id is its run's by joining on run_id alone,
    # which Citus does only on the distribution column.
    "joins tables on run_id alone": [
        "tenants/test_org_id__every_row_names_its_organization.sql",
    ],
    # The file drops 0003's unique index inside its transaction: on Citus that drops
    # the coordinator's shell index, not the shards'.
    "drops an index to plant rows it forbids": [
        "maintenance/test_cancel_redundant_timer_runs__keeps_one_per_routine.sql",
    ],
}


def contract_files() -> list[str]:
    left_out = {name for names in NOT_ON_CITUS.values() for name in names}
    return sorted(
        str(path.relative_to(SQL_TESTS))
        for directory in CONTRACT_DIRECTORIES
        for path in (SQL_TESTS / directory).glob("test*.sql")
        if str(path.relative_to(SQL_TESTS)) not in left_out
    )


def test_every_file_left_out_exists_once_with_its_reason():
    names = [name for names in NOT_ON_CITUS.values() for name in names]
    assert len(names) == len(set(names))
    assert [name for name in names if not (SQL_TESTS / name).is_file()] == []
    # the subset covers each area the contract names on the cluster
    kept = contract_files()
    assert len(kept) >= 180
    for needle in (
        "claim_runs__organization_cap",  # caps
        "claim_runs__round_robin_across_organizations",  # claims, fairness
        "claim_runs__computer_lease_blocks_only_its_waiters",  # computer leases
        "fencing__reclaimed_owner_refused_everywhere",  # fences
        "submit_message__held",  # chat coalescing, held messages
        "take_steering__held_messages",
        "run_now__gates",  # gates
        "weekly_spend__counts_charges_in_their_week",  # budgets
        "next_slot__dst_transitions",  # schedules
        "stream_token__array_form_agrees",  # tenants
        "erase_org__deletes_the_organization_and_everything_in_it",  # erasure
        "purge_finished__deletes_old_finished_runs_with_their_rows",  # retention
        "reap_stale__interactive_requeued_then_stale",  # maintenance
        "notify__skips_from_half_full_queue",  # a full NOTIFY queue
    ):
        assert any(needle in name for name in kept), needle


@pytest.fixture(scope="module")
def node_session():
    """A session on the worker node that holds every shard, with pgTAP and the test
    fixtures there, the schema distributed from the coordinator."""
    nodes = [LocalCluster(settings=CITUS) for _ in range(3)]
    try:
        for node in nodes:
            node.start()
        coordinator_dsn = cluster_database(nodes, "contract")
        with psycopg.connect(coordinator_dsn, autocommit=True) as conn:
            conn.execute(
                "select citus_set_node_property('127.0.0.1', %s, 'shouldhaveshards', false)",
                (nodes[2].port,),
            )
            migrate_citus(conn)
        with psycopg.connect(nodes[1].dsn_for("contract"), autocommit=True) as conn:
            # pgTAP and the fixtures are this node's alone (Citus would send the DDL to
            # the coordinator's catalog); the files create temporary functions too.
            conn.execute("set citus.enable_ddl_propagation = off")
            conn.execute("set check_function_bodies = off")  # (fixtures of older schemas)
            load_test_fixtures(conn)
            # Every multi-shard write of a file's own fixtures stays on this session's
            # connection (its shards are local), and the fixtures' reads inside a file's
            # statements over distributed tables read those local shards.
            conn.execute("set citus.multi_shard_modify_mode = sequential")
            conn.execute("set citus.allow_nested_distributed_execution = on")
            conn.autocommit = False
            yield conn
    finally:
        for node in nodes:
            node.destroy()


@pytest.mark.parametrize("name", contract_files())
def test_the_contract_file_passes_on_a_worker_node(node_session, name):
    lines = Runner(node_session).run((SQL_TESTS / name).read_text())
    plan = next(line for line in lines if line.startswith("1.."))
    failed = [line for line in lines if line.startswith("not ok")]
    assert failed == [], "\n".join(line for line in lines if line.startswith(("not ok", "#")))
    assert sum(line.startswith("ok") for line in lines) == int(plan[3:])
