"""The shared thread pool: results do not depend on threads, and a forked child gets its own pool
(it inherits the parent's pool object but not its threads, which used to hang it)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import topkeval as tk

FORK_SCRIPT = r"""
import multiprocessing as mp, numpy as np, topkeval as tk
rng = np.random.default_rng(0)
n = 300_000  # large enough for the kernel to split queries over threads
log = {"query": rng.integers(0, 3000, n), "relevance": rng.integers(0, 2, n), "score": rng.random(n)}
def run(_):
    return float(tk.evaluate(log, metrics=["recall@10"]).summary.iloc[0, 0])
if __name__ == "__main__":
    parent = run(0)  # creates the pool in the parent
    with mp.get_context("fork").Pool(2) as pool:
        children = pool.map(run, [0, 1], chunksize=1)
    assert children == [parent, parent], (parent, children)
    print("ok")
"""


def test_forked_child_gets_its_own_pool(tmp_path):
    script = tmp_path / "fork.py"
    script.write_text(FORK_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_threads_do_not_change_results():
    rng = np.random.default_rng(1)
    n = 400_000
    log = {"query": rng.integers(0, 4000, n), "relevance": rng.integers(0, 3, n), "score": rng.integers(0, 50, n) / 7}
    metrics = ["recall@5", "precision@20", "r_precision", "ndcg@10", "ap"]
    one = tk.evaluate(log, metrics=metrics, threads=1).per_query
    many = tk.evaluate(log, metrics=metrics, threads=3).per_query
    np.testing.assert_array_equal(one[metrics].to_numpy(), many[metrics].to_numpy())


def test_run_parallel_gives_results_in_task_order_raises_the_first_error_and_keeps_no_task():
    """The caller and the pool take tasks in turn: results come in task order, a task's nested call runs
    in its own thread, the first failing task's error is raised once all have ended, and nothing of the
    tasks is held after the call (a pool thread waking late finds none)."""
    import gc
    import threading
    import time
    import weakref

    from topkeval.kernels.threads import run_parallel

    def slow_square(x):
        time.sleep(0.001 * (x % 3))
        inner = run_parallel(lambda y: (y, threading.get_ident()), [x, x + 1])
        assert {ident for _, ident in inner} == {threading.get_ident()}  # nested: in the task's own thread
        return x * x

    assert run_parallel(slow_square, range(40), workers=4) == [x * x for x in range(40)]
    ended = []

    def fails(x):
        time.sleep(0.002)
        ended.append(x)
        if x in (5, 7):
            raise ValueError(f"task {x}")
        return x

    try:
        run_parallel(fails, range(12), workers=3)
    except ValueError as exc:
        assert str(exc) == "task 5" and sorted(ended) == list(range(12))
    else:
        raise AssertionError("no error raised")

    class Task:
        pass

    task = Task()
    ref = weakref.ref(task)
    run_parallel(lambda t: None, [task, Task()], workers=2)
    del task
    gc.collect()
    assert ref() is None
