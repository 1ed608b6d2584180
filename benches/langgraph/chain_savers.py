#!/usr/bin/env python3
"""LangGraph's SqliteSaver and PostgresSaver on the chain of pactgraph's
`cli_pure_step` bench (benches/commit.rs): 2,000 steps of a supervisor/worker loop
whose state holds a constant ~100 KB slice no step writes.

The state: `task`, a list of 10,000 strings `item-0000` ... (the same ~100 KB slice
pactgraph's bench gives as `--input`), `result` (what the worker writes) and `count`
(LangGraph has no step budget in the state: the loop counts its own steps; pactgraph's
loop is stopped by `max_steps`). One node `work` sets `result = {"ok": True}` and
`count += 1`; a conditional edge out of it (the supervisor's decision) routes back to
`work` until `count` reaches N, then to END. One step = one superstep = one routing
decision + one node + one checkpoint.

Each measurement is one `invoke` on a fresh `thread_id` with `durability="sync"` (each
superstep's checkpoint written before the next starts: LangGraph's durable step),
timed around the `invoke` only (the interpreter's start and imports are not counted),
after one warm-up run in the same process. Printed: seconds for the run and µs per
step; with `--saver all` also each saver minus `InMemorySaver` per step (what the
database costs, as pactgraph's bench reports the store minus `--store none`).

Savers: `memory` (InMemorySaver), `sqlite` (SqliteSaver on a file in a new temp
folder: WAL is not set by LangGraph, the library's defaults are used as it opens
them), `postgres` (PostgresSaver on `--url`/`$PG_URL`, with `synchronous_commit=off`
by default, pactgraph's `normal`; `--synchronous-commit on` for the other).

Usage:
    python chain_savers.py [--saver memory|sqlite|postgres|all] [--steps 2000]
                           [--runs 1] [--url URL] [--synchronous-commit off|on]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from typing import TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    task: list
    result: dict
    count: int


BIG = [f"item-{i:04d}" for i in range(10_000)]


def build(steps: int) -> StateGraph:
    def work(state: State) -> dict:
        return {"result": {"ok": True}, "count": state["count"] + 1}

    def route(state: State) -> str:
        return "work" if state["count"] < steps else END

    g = StateGraph(State)
    g.add_node("work", work)
    g.add_conditional_edges(START, route, ["work", END])
    g.add_conditional_edges("work", route, ["work", END])
    return g


def one_run(app, steps: int) -> float:
    config = {
        "configurable": {"thread_id": str(uuid.uuid4())},
        "recursion_limit": steps + 10,
    }
    t = time.perf_counter()
    out = app.invoke({"task": BIG, "result": {}, "count": 0}, config, durability="sync")
    elapsed = time.perf_counter() - t
    assert out["count"] == steps and len(out["task"]) == len(BIG), "the run did not finish"
    return elapsed


def timed(app, steps: int, runs: int) -> list[float]:
    one_run(app, steps)  # warm-up
    return [one_run(app, steps) for _ in range(runs)]


def measure(saver: str, args) -> list[float]:
    graph = build(args.steps)
    if saver == "memory":
        return timed(graph.compile(checkpointer=InMemorySaver()), args.steps, args.runs)
    if saver == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with tempfile.TemporaryDirectory() as tmp:
            conn = sqlite3.connect(os.path.join(tmp, "lg.db"), check_same_thread=False)
            try:
                app = graph.compile(checkpointer=SqliteSaver(conn))
                return timed(app, args.steps, args.runs)
            finally:
                conn.close()
    if saver == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.conninfo import make_conninfo

        url = args.url or os.environ.get("PG_URL")
        if not url:
            sys.exit("--saver postgres needs --url or $PG_URL")
        url = make_conninfo(url, options=f"-c synchronous_commit={args.synchronous_commit}")
        with PostgresSaver.from_conn_string(url) as cp:
            cp.setup()
            return timed(graph.compile(checkpointer=cp), args.steps, args.runs)
    sys.exit(f"unknown saver {saver!r}: memory, sqlite, postgres or all")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--saver", default="all")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--url")
    p.add_argument("--synchronous-commit", default="off", choices=["off", "on"])
    args = p.parse_args()
    savers = ["memory", "sqlite", "postgres"] if args.saver == "all" else [args.saver]
    medians = {}
    for saver in savers:
        times = measure(saver, args)
        med = statistics.median(times)
        medians[saver] = med
        print(
            f"{saver}: {med:.3f} s a run, {med / args.steps * 1e6:,.1f} µs/step "
            f"(median of {len(times)}: {', '.join(f'{t:.3f}' for t in times)})",
            flush=True,
        )
    if "memory" in medians:
        for saver, med in medians.items():
            if saver != "memory":
                diff = (med - medians["memory"]) / args.steps * 1e6
                print(f"{saver} minus memory: {diff:,.1f} µs/step", flush=True)


if __name__ == "__main__":
    main()
