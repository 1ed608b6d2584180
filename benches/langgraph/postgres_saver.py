#!/usr/bin/env python3
"""LangGraph's PostgresSaver on the supervisor/worker loop that pactgraph's
`durable_step/supervisor_loop` bench drives (benches/store.rs).

The graph: one node `work` that writes a small value to the state (a counter
and a short string), and a conditional edge out of it that routes back to
`work` until the counter reaches N, then to END. The routing function is the
supervisor's decision; the node is the worker. Each pass is one LangGraph
superstep, and each superstep writes one checkpoint, so a "step" here is one
superstep = one routing decision + one node run + one checkpoint. A run of N
steps is one `invoke` on a fresh thread_id.

With `--shape two-node` the loop is `supervisor` -> `work` -> `supervisor` ...
instead (two supersteps, two checkpoints, per loop iteration); the figure is
then given per superstep and per iteration.

Timed per run: the whole `invoke` (including its input checkpoint and the
initial checkpoint lookup), divided by N. Printed: the median over the timed
runs, after one warm-up run, for PostgresSaver (synchronous_commit as chosen)
and for InMemorySaver on the same graph (engine cost without a database).

Usage:
    python postgres_saver.py [--url URL] [--steps 1000] [--runs 5]
                             [--synchronous-commit on|off|both]
                             [--pipeline] [--shape one-node|two-node]
                             [--count]
The URL comes from --url or $PG_URL; the database must exist (setup() creates
LangGraph's tables in it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from importlib import metadata
from typing import TypedDict

import psycopg
from psycopg.conninfo import make_conninfo

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    count: int
    result: str


def build(steps: int, shape: str) -> StateGraph:
    """The supervisor/worker loop as a LangGraph StateGraph (not compiled)."""

    def work(state: State) -> dict:
        return {"count": state["count"] + 1, "result": "ok"}

    def route(state: State) -> str:
        return "work" if state["count"] < steps else END

    g = StateGraph(State)
    g.add_node("work", work)
    if shape == "one-node":
        g.add_conditional_edges(START, route, ["work", END])
        g.add_conditional_edges("work", route, ["work", END])
    else:

        def supervisor(state: State) -> dict:
            return {}

        g.add_node("supervisor", supervisor)
        g.add_edge(START, "supervisor")
        g.add_conditional_edges("supervisor", route, ["work", END])
        g.add_edge("work", "supervisor")
    return g


def supersteps(steps: int, shape: str) -> int:
    """Supersteps (= checkpoints after the input one) in one run."""
    return steps if shape == "one-node" else 2 * steps + 1


def durability_kwargs() -> tuple[dict, str]:
    """`durability="sync"` where invoke has it (langgraph >= 0.6)."""
    import inspect

    from langgraph.pregel import Pregel

    if "durability" in inspect.signature(Pregel.invoke).parameters:
        return {"durability": "sync"}, "durability=sync"
    # Older versions: checkpoint_during=True writes each checkpoint in the step.
    return {"checkpoint_during": True}, "checkpoint_during=True (no durability param)"


def one_run(app, steps: int, shape: str, kw: dict) -> float:
    config = {
        "configurable": {"thread_id": str(uuid.uuid4())},
        "recursion_limit": supersteps(steps, shape) + 10,
    }
    t = time.perf_counter()
    out = app.invoke({"count": 0, "result": ""}, config, **kw)
    elapsed = time.perf_counter() - t
    assert out["count"] == steps, out
    return elapsed


def measure(app, steps: int, runs: int, shape: str, kw: dict) -> list[float]:
    one_run(app, steps, shape, kw)  # warm-up
    return [one_run(app, steps, shape, kw) for _ in range(runs)]


def report(label: str, times: list[float], steps: int, shape: str) -> float:
    n = supersteps(steps, shape)
    per = [t / n * 1e6 for t in times]
    med = statistics.median(per)
    line = (
        f"{label}: median {med:,.0f} µs/step over {len(times)} runs of "
        f"{n} steps (min {min(per):,.0f}, max {max(per):,.0f})"
    )
    if shape == "two-node":
        line += f"; {statistics.median(times) / steps * 1e6:,.0f} µs per loop iteration"
    print(line, flush=True)
    return med


def conninfo(url: str, sync_commit: str) -> str:
    if sync_commit == "off":
        return make_conninfo(url, options="-c synchronous_commit=off")
    return url


def count_statements(url: str, steps: int, shape: str, kw: dict, builder) -> None:
    """One untimed run with psycopg's execute/executemany counted on the client
    and the database's commit and row counters read before and after."""
    counts = {"execute": 0, "executemany": 0, "executemany_rows": 0, "pipeline": 0}
    orig_exec = psycopg.Cursor.execute
    orig_many = psycopg.Cursor.executemany
    orig_pipe = psycopg.Connection.pipeline

    def execute(self, *a, **k):
        counts["execute"] += 1
        return orig_exec(self, *a, **k)

    def executemany(self, query, params_seq, *a, **k):
        params_seq = list(params_seq)
        counts["executemany"] += 1
        counts["executemany_rows"] += len(params_seq)
        return orig_many(self, query, params_seq, *a, **k)

    def pipeline(self, *a, **k):
        counts["pipeline"] += 1
        return orig_pipe(self, *a, **k)

    def db_stats() -> tuple[int, int]:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("SELECT pg_stat_clear_snapshot()")
            (commits,) = c.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
            (rows,) = c.execute(
                "SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) FROM pg_stat_user_tables"
            ).fetchone()
        return commits, rows

    with PostgresSaver.from_conn_string(url) as saver:
        app = builder.compile(checkpointer=saver)
        one_run(app, steps, shape, kw)  # warm, so setup noise is outside
    time.sleep(1.5)  # the backend's stats are flushed on exit
    c0, r0 = db_stats()
    time.sleep(1.5)
    c0b, _ = db_stats()
    monitor = c0b - c0  # commits made by db_stats itself
    psycopg.Cursor.execute = execute
    psycopg.Cursor.executemany = executemany
    psycopg.Connection.pipeline = pipeline
    try:
        with PostgresSaver.from_conn_string(url) as saver:
            app = builder.compile(checkpointer=saver)
            thread = str(uuid.uuid4())
            config = {
                "configurable": {"thread_id": thread},
                "recursion_limit": supersteps(steps, shape) + 10,
            }
            app.invoke({"count": 0, "result": ""}, config, **kw)
    finally:
        psycopg.Cursor.execute = orig_exec
        psycopg.Cursor.executemany = orig_many
        psycopg.Connection.pipeline = orig_pipe
    time.sleep(1.5)
    c1, r1 = db_stats()
    with psycopg.connect(url, autocommit=True) as c:
        (cps,) = c.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = %s", (thread,)
        ).fetchone()
        (wr,) = c.execute(
            "SELECT count(*) FROM checkpoint_writes WHERE thread_id = %s", (thread,)
        ).fetchone()
        (bl,) = c.execute(
            "SELECT count(*) FROM checkpoint_blobs WHERE thread_id = %s", (thread,)
        ).fetchone()
    n = supersteps(steps, shape)
    commits = c1 - c0 - monitor  # minus the monitor's own connections
    print(
        f"statements per step (client side, one run of {n} steps): "
        f"{counts['execute'] / n:.2f} execute + {counts['executemany'] / n:.2f} executemany "
        f"({counts['executemany_rows'] / n:.2f} rows) in {counts['pipeline'] / n:.2f} pipelines; "
        f"totals {counts}",
        flush=True,
    )
    print(
        f"server side: {commits / n:.2f} commits/step ({commits} in the run), "
        f"{(r1 - r0) / n:.2f} rows inserted or updated/step; "
        f"rows for the thread: {cps} checkpoints, {wr} writes, {bl} blobs",
        flush=True,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("PG_URL"))
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--synchronous-commit",
        choices=["on", "off", "both"],
        default="on",
        help="the session's synchronous_commit (off = same durability as pactgraph's normal mode)",
    )
    ap.add_argument(
        "--pipeline",
        action="store_true",
        help="PostgresSaver.from_conn_string(url, pipeline=True)",
    )
    ap.add_argument("--shape", choices=["one-node", "two-node"], default="one-node")
    ap.add_argument("--no-memory", action="store_true", help="skip the InMemorySaver figure")
    ap.add_argument(
        "--count",
        action="store_true",
        help="also count statements and commits per step in one untimed run",
    )
    a = ap.parse_args()
    if not a.url:
        ap.error("give the database URL with --url or PG_URL")

    versions = ", ".join(
        f"{p} {metadata.version(p)}"
        for p in (
            "langgraph",
            "langgraph-checkpoint",
            "langgraph-checkpoint-postgres",
            "psycopg",
            "psycopg-binary",
        )
    )
    kw, mode = durability_kwargs()
    builder = build(a.steps, a.shape)
    print(f"versions: {versions}; Python {sys.version.split()[0]}")
    print(
        f"graph: {a.shape} supervisor/worker loop, {a.steps} steps/run, {a.runs} timed runs "
        f"after 1 warm-up, {mode}, pipeline={a.pipeline}",
        flush=True,
    )

    with psycopg.connect(a.url, autocommit=True) as c:
        server = c.execute("SHOW server_version").fetchone()[0]
    print(f"server: PostgreSQL {server}", flush=True)

    modes = ["on", "off"] if a.synchronous_commit == "both" else [a.synchronous_commit]
    for sc in modes:
        url = conninfo(a.url, sc)
        with PostgresSaver.from_conn_string(url, pipeline=a.pipeline) as saver:
            saver.setup()
            with saver.conn.cursor() as cur:
                shown = cur.execute("SHOW synchronous_commit").fetchone()
            shown = shown["synchronous_commit"] if isinstance(shown, dict) else shown[0]
            assert shown == sc, (shown, sc)
            app = builder.compile(checkpointer=saver)
            times = measure(app, a.steps, a.runs, a.shape, kw)
        report(f"PostgresSaver (synchronous_commit={sc})", times, a.steps, a.shape)
        if a.count:
            count_statements(url, a.steps, a.shape, kw, builder)

    if not a.no_memory:
        app = builder.compile(checkpointer=InMemorySaver())
        times = measure(app, a.steps, a.runs, a.shape, kw)
        report("InMemorySaver", times, a.steps, a.shape)
    return 0


if __name__ == "__main__":
    sys.exit(main())
