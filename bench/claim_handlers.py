"""What runs of a handler no worker serves cost a chat worker's claim: nothing.

Two databases cloned from one template hold the same 20 organizations, a chat agent of
handler `chat` in each and a research agent of handler `research`, and 2,000 finished
chat runs; in one of them 10,000
chat-lane runs of the research agents are queued, older than every chat message (nobody
serves `research`). A chat stream runs against both, alternating: each message is
submitted (submit_message, committed), then the chat worker's keyed claim (interactive
lane, p_handlers => {chat}, p_limit 10) takes it and finish_run ends it. Reported per
database: the claim's time, the entries of runs and its indexes it read, and the stream's
submit-to-claimed time (the database's part of a first response) at p50 and p99.

    python -m bench claim_handlers [--quick] [--unserved N] [--messages N]
"""

from __future__ import annotations

import argparse
import time
import uuid

import psycopg

from bench import _common

ORGS = 20
TEMPLATE = "bench_handlers_template"
CLAIM = """
select run_id, fence, handler from runlane.claim_runs(
    p_worker => 'chat-worker', p_lanes => array['interactive'], p_limit => 10,
    p_lease => interval '60 seconds', p_claim_key => %s::uuid, p_report_skipped => true,
    p_handlers => array['chat'])
"""
# Entries of runs and its indexes returned to scans, by this transaction so far.
READ = """
select sum(pg_stat_get_xact_tuples_returned(i.oid))::bigint
from (
    select 'runlane.runs'::regclass::oid as oid
    union all
    select x.indexrelid from pg_index as x where x.indrelid = 'runlane.runs'::regclass
) as i
"""


def prepare(pg, unserved: int) -> dict[str, str]:
    template = _common.migrated_database(pg, TEMPLATE)
    with psycopg.connect(template, autocommit=True) as conn:
        _common.seed_agents(conn, agents=2 * ORGS, orgs=ORGS)
        # agent1..agent20: chat; agent21..agent40: research (one per organization each)
        conn.execute(
            "update runlane.agents set handler = case when substr(agent_id, 6)::int <= %s "
            "then 'chat' else 'research' end",
            (ORGS,),
        )
        # a history of 2,000 finished chat runs: a table's statistics as in use, not empty
        conn.execute(
            """
            insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt,
                                      model, handler, state, finished_at)
            select a.org_id, a.agent_id, 'interactive', 'interactive', 'old-' || g, 'x',
                   'noop', 'chat', 'succeeded', now()
            from generate_series(1, 2000) as g
            join runlane.agents as a on a.agent_id = 'agent' || (g %% %s + 1)
            """,
            (ORGS,),
        )
    dsns = {}
    for case, backlog in (("no backlog", 0), ("10k unserved", unserved)):
        name = "bench_handlers_" + case.replace(" ", "_")
        dsns[case] = _common.create_database(pg, name, template=TEMPLATE)
        with psycopg.connect(dsns[case], autocommit=True) as conn:
            conn.execute(
                """
                insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt,
                                          model, handler)
                select a.org_id, a.agent_id, 'interactive', 'interactive', 'research-' || g,
                       'x', 'noop', a.handler
                from generate_series(1, %s::int) as g
                join runlane.agents as a on a.agent_id = 'agent' || (%s + g %% %s + 1)
                """,
                (backlog, ORGS, ORGS),
            )
        _common.vacuum_analyze(dsns[case])
    return dsns


def one_message(api: psycopg.Connection, worker: psycopg.Connection, i: int) -> dict:
    agent = f"agent{i % ORGS + 1}"
    started = time.perf_counter()
    api.execute(
        "select * from runlane.submit_message(%s, %s, 'hello')", (agent, f"chat-{i}")
    ).fetchone()
    submitted = time.perf_counter()
    with worker.transaction():  # (the claim and its two reads of the counters)
        before = worker.execute(READ).fetchone()[0]
        claim_started = time.perf_counter()
        rows = worker.execute(CLAIM, (str(uuid.uuid4()),)).fetchall()
        claimed = time.perf_counter()
        read = worker.execute(READ).fetchone()[0] - before
    if len(rows) != 1 or rows[0][2] != "chat":
        raise RuntimeError(f"the chat claim returned {rows}, expected one chat run")
    run_id, fence, _ = rows[0]
    worker.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence))
    return {
        "claim_ms": (claimed - claim_started) * 1000,
        # (without the counter read between the submit and the claim)
        "stream_ms": (claimed - started) * 1000 - (claim_started - submitted) * 1000,
        "entries": read,
    }


def main(argv=None) -> list[str]:
    ap = argparse.ArgumentParser(
        prog="python -m bench claim_handlers", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="fewer messages (300 instead of 1000)")
    ap.add_argument("--unserved", type=int, default=10_000, help="queued unserved runs (10000)")
    ap.add_argument("--messages", type=int, help="chat messages per database")
    args = ap.parse_args(argv)
    messages = args.messages or (300 if args.quick else 1000)
    started = time.monotonic()
    results = []
    with _common.cluster() as pg:
        dsns = prepare(pg, args.unserved)
        apis = {case: psycopg.connect(dsn, autocommit=True) for case, dsn in dsns.items()}
        workers = {case: psycopg.connect(dsn, autocommit=True) for case, dsn in dsns.items()}
        try:
            samples: dict[str, list[dict]] = {case: [] for case in dsns}
            for i in range(messages + 50):  # 50 warm-up messages each (plans cached)
                order = list(dsns) if i % 2 else list(reversed(dsns))
                for case in order:
                    sample = one_message(apis[case], workers[case], i)
                    if i >= 50:
                        samples[case].append(sample)
            for case, values in samples.items():
                claim = [v["claim_ms"] for v in values]
                stream = [v["stream_ms"] for v in values]
                entries = [v["entries"] for v in values]
                results.append(
                    {
                        "case": case,
                        "messages": messages,
                        "claim_p50_ms": round(_common.percentile(claim, 0.5), 3),
                        "claim_p99_ms": round(_common.percentile(claim, 0.99), 3),
                        "entries_p50": _common.percentile(entries, 0.5),
                        "entries_max": max(entries),
                        "stream_p50_ms": round(_common.percentile(stream, 0.5), 3),
                        "stream_p99_ms": round(_common.percentile(stream, 0.99), 3),
                    }
                )
        finally:
            for conn in [*apis.values(), *workers.values()]:
                conn.close()
        info = _common.machine(pg)
    path = _common.write_result("claim_handlers", {"machine": info, "results": results})
    summary = [
        f"a chat worker's claim (p_handlers {{chat}}) beside {args.unserved:,} queued runs of "
        f"a handler nobody serves, {messages} messages each:"
    ]
    for r in results:
        summary.append(
            f"  {r['case']:<13}: claim p50 {r['claim_p50_ms']:.3f} ms, p99 "
            f"{r['claim_p99_ms']:.3f} ms, entries read p50 {r['entries_p50']:.0f} "
            f"(max {r['entries_max']}); submit to claimed p50 {r['stream_p50_ms']:.3f} ms, "
            f"p99 {r['stream_p99_ms']:.3f} ms"
        )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
