"""One process-wide thread pool for the compiled kernels (they release the GIL).

Creating threads costs about a millisecond per call, which is visible next to kernels that run
for tens of milliseconds, so the pool is created once, on first use, and reused.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0
_POOL_PID = 0  # a forked child inherits the pool object but not its threads: it makes its own
# (the pid check and the reset at fork below both see to it)
_LOCK = threading.Lock()


def default_threads() -> int:
    """Threads used by the kernels: ``TOPKEVAL_THREADS`` or the CPUs this process may use."""
    env = os.environ.get("TOPKEVAL_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def run_parallel(fn, tasks, workers: int | None = None) -> list:
    """``[fn(t) for t in tasks]``, the tasks spread over the calling thread and the shared pool (results
    in order of ``tasks``).

    The calling thread works too: it and the pool's threads (up to one fewer than the tasks) take the
    tasks in order, each the next one not yet taken, until none is left; the call returns once every
    task is done. So a pool thread that is slow to wake (a busy machine, a virtual CPU descheduled)
    costs nothing: the caller takes its tasks, and at worst runs them all, as one thread would. A
    single task runs in the calling thread, and so do the subtasks of a task that itself calls
    ``run_parallel`` (the pool is never waited on from inside the pool, which could deadlock). An
    exception of a task is raised once every task has ended (the first in task order).
    """
    tasks = list(tasks)
    if len(tasks) <= 1 or getattr(_inside, "flag", False):
        return [fn(t) for t in tasks]
    n = len(tasks)
    results: list = [None] * n
    errors: list = [None] * n
    state = {"next": 0, "done": 0}
    cond = threading.Condition()
    # the work, emptied once done: a pool thread that wakes after the tasks are all taken finds nothing,
    # and holds no reference to them (to the memory map of a file read, say, closed by the caller)
    box = [fn, tasks]

    def work() -> None:
        was = getattr(_inside, "flag", False)
        _inside.flag = True
        try:
            while True:
                with cond:
                    i = state["next"]
                    if i >= n:
                        return
                    state["next"] = i + 1
                    call, items = box
                try:
                    results[i] = call(items[i])
                except BaseException as exc:  # raised by the caller, once every task has ended
                    errors[i] = exc
                with cond:
                    state["done"] += 1
                    if state["done"] == n:
                        cond.notify_all()
        finally:
            _inside.flag = was

    # submitting under the lock: a call from another thread that needs a larger pool replaces it
    # (and shuts the old one down) only between submissions, never between getting the pool and
    # submitting to it; tasks already submitted finish on the old pool
    helpers = min(n - 1, max(default_threads(), workers or 0) - 1)
    if helpers > 0:
        with _LOCK:
            pool = _pool(max(default_threads(), workers or 0))
            for _ in range(helpers):
                pool.submit(work)
    work()
    with cond:
        while state["done"] < n:
            cond.wait()
        box.clear()
        out, failed = list(results), [exc for exc in errors if exc is not None]
        results.clear()  # the late pool thread's view of them: empty too
        errors.clear()
    del fn, tasks
    if failed:
        raise failed[0]
    return out


_inside = threading.local()


def row_ranges(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` consecutive (lo, hi) ranges of about equal length covering 0..n."""
    bounds = [n * p // parts for p in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _pool(size: int) -> ThreadPoolExecutor:
    """The shared pool, at least ``size`` threads (called with ``_LOCK`` held)."""
    global _POOL, _POOL_SIZE, _POOL_PID
    forked = _POOL_PID != os.getpid()
    if _POOL is None or _POOL_SIZE < size or forked:
        if _POOL is not None and not forked:
            _POOL.shutdown(wait=False)  # its queued tasks still run; it takes no new ones
        _POOL_SIZE, _POOL_PID = size, os.getpid()
        _POOL = ThreadPoolExecutor(_POOL_SIZE, thread_name_prefix="topkeval")
    return _POOL


def _reset_in_child() -> None:
    """After a fork: the child has the pool object but none of its threads, and maybe a held lock."""
    global _POOL, _POOL_SIZE, _POOL_PID, _LOCK
    _POOL, _POOL_SIZE, _POOL_PID, _LOCK = None, 0, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)
