"""Run the engine on a grouped log with one kernel path forced (1: counting, 2: sorting)."""

from __future__ import annotations

from topkeval import engine
from topkeval.backends.cpu import CpuBackend


def evaluate_path(log, metrics, conv, path: int = 0, threads: int | None = 1):
    """Results of ``log`` with the CPU kernel's counting (1) or sorting (2) path forced (0: automatic)."""
    plan = engine.make_plan(metrics, conv)
    batch = engine.evaluate_log(log, plan, backend=CpuBackend(path), threads=threads)
    return engine.build_results([batch], plan, sources=lambda: [(log, None)])
