"""Where the statistics are computed: one module per backend, behind one dispatcher.

=============  ======================================================================================
``cpu.py``     :class:`~topkeval.backends.cpu.CpuBackend`: the compiled kernels on a grouped log (a
               table in memory, the chunks of a streamed file, runs with judgments apart); reads the
               rows again for :meth:`~topkeval.Results.diff`
``matrix.py``  :class:`~topkeval.backends.matrix.MatrixBackend`: score matrices (numpy, torch on the
               CPU or a GPU): counts on the device, or the top of each row handed to the CPU backend
``spark.py``   :class:`~topkeval.backends.spark.SparkBackend`: a Spark DataFrame, each partition
               evaluated by the CPU backend on the executors, the sums reduced on the driver
=============  ======================================================================================

Every front door asks :func:`select` which backend takes its data and plan; each backend says
whether it does (``supports(data, plan)``), the most specific first, the CPU backend last (it takes
every table and every plan). Each
returns the engine's batches to the one results builder
(:func:`topkeval.engine.build_results`), so the summary, ``info`` and the per-query table are made
the same way on every backend.

How to add a backend: a module here with a class implementing
:class:`~topkeval.engine.rules.Backend` (``compute(batch, model, plan, judgments, threads) ->
QueryStats``, reading the conventions through :mod:`topkeval.engine.rules`), a ``supports(data)``
test registered below with :func:`register_backend`, and the shared fixtures of
``tests/test_backends.py`` run on it (its values must equal the CPU backend's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class BackendEntry:
    """A backend the dispatcher knows: its name, whether it takes some data, what it is."""

    name: str
    supports: Callable[[object, object], bool]
    description: str


_REGISTRY: list[BackendEntry] = []


def register_backend(name: str, supports: Callable[[object, object], bool], description: str) -> None:
    """Let :func:`select` choose backend ``name`` for the data and plan that ``supports(data, plan)``
    accepts (asked before the backends registered earlier; the CPU backend, registered first, takes
    what no other does). ``plan`` may be None: the data alone decides."""
    _REGISTRY[:] = [e for e in _REGISTRY if e.name != name]
    _REGISTRY.insert(0, BackendEntry(name, supports, description))


def select(data, plan=None) -> str:
    """The name of the backend that takes ``data`` (and ``plan``, a
    :class:`~topkeval.engine.Plan`): the first registered backend whose ``supports(data, plan)`` is
    true.

    >>> import numpy as np
    >>> select({"query": [1], "relevance": [1], "score": [0.5]}), select(np.zeros((2, 3)))
    ('cpu', 'matrix')
    """
    for entry in _REGISTRY:
        if entry.supports(data, plan):
            return entry.name
    raise AssertionError("the CPU backend takes every table")  # registered below, it accepts anything


def backends() -> list[BackendEntry]:
    """The registered backends, in the order :func:`select` asks them."""
    return list(_REGISTRY)


def _is_spark(data, plan=None) -> bool:
    """A pyspark DataFrame (classic or Spark Connect), recognised without importing pyspark."""
    return type(data).__module__.startswith("pyspark.") and hasattr(data, "mapInArrow")


def _is_matrix(data, plan=None) -> bool:
    """A score matrix: a 2-D numpy array or torch tensor (a dict is a table of columns; the dict of
    matrices that :func:`topkeval.evaluate_matrix` takes, one per model, is told apart there)."""
    kind = type(data).__module__.split(".")[0]
    return kind in ("numpy", "torch") and getattr(data, "ndim", 0) == 2


register_backend("cpu", lambda data, plan: True, "the compiled CPU kernels on a grouped log (tables, files, runs)")
register_backend("matrix", _is_matrix, "score matrices (numpy, torch on the CPU or a GPU)")
register_backend("spark", _is_spark, "a Spark DataFrame, partition by partition")

__all__ = ["BackendEntry", "backends", "register_backend", "select"]
