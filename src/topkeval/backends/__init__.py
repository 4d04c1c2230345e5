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

Each backend module declares one :class:`~topkeval.backends.plugins.BackendPlugin` (``PLUGIN``):
its name, the data it takes (``accepts(data, plan)``), its capabilities (clicks, stacked tables,
judgments apart, segments, streaming, matrices...), per missing capability the advice to give, and
``evaluate(request)``. They are registered here, in one place, the most specific first and the
CPU backend last (it takes every table). :mod:`topkeval.request` asks :func:`plugin_for` which
backend takes the data, refuses what it does not support with a message made from the declarations
(:func:`check_supported`), and hands it the request. Each backend returns the engine's batches to
the one results builder (:func:`topkeval.engine.build_results`), so the summary, ``info`` and the
per-query table are made the same way on every backend.

How to add a backend: one module here with its ``PLUGIN`` (and, for the statistics, a class
implementing :class:`~topkeval.engine.rules.Backend`, reading the conventions through
:mod:`topkeval.engine.rules`), one :func:`register_backend` line below, and the shared fixtures of
``tests/test_backends.py`` run on it (its values must equal the CPU backend's).
"""

from __future__ import annotations

from ..errors import ParameterError
from .plugins import CAPABILITIES, BackendPlugin, refusal

_REGISTRY: list[BackendPlugin] = []


def register_backend(plugin: BackendPlugin) -> None:
    """Let the dispatcher choose ``plugin`` for the data its ``accepts(data, plan)`` takes (asked
    before the backends registered earlier; the CPU backend, registered first, takes what no other
    does). A backend of the same name is replaced."""
    _REGISTRY[:] = [e for e in _REGISTRY if e.name != plugin.name]
    _REGISTRY.insert(0, plugin)


def unregister_backend(name: str) -> None:
    """Take backend ``name`` out of the dispatcher (a test's toy backend, for example)."""
    _REGISTRY[:] = [e for e in _REGISTRY if e.name != name]


def plugin_for(data, plan=None) -> BackendPlugin:
    """The backend that takes ``data`` (and ``plan``, a :class:`~topkeval.engine.Plan`, or None):
    the first registered backend whose ``accepts(data, plan)`` is true."""
    for entry in _REGISTRY:
        if entry.accepts(data, plan):
            return entry
    raise AssertionError("the CPU backend takes every table")  # registered below, it accepts anything


def select(data, plan=None) -> str:
    """The name of the backend that takes ``data`` (see :func:`plugin_for`).

    >>> import numpy as np
    >>> select({"query": [1], "relevance": [1], "score": [0.5]}), select(np.zeros((2, 3)))
    ('cpu', 'matrix')
    """
    return plugin_for(data, plan).name


def with_capability(data, capability: str) -> BackendPlugin:
    """The backend for a front door that needs ``capability`` whatever the data (``evaluate_matrix``:
    ``"matrices"``): the first that takes the data and has it, else the first that has it (whose own
    checks then say what is wrong with the data)."""
    having = [entry for entry in _REGISTRY if entry.supports(capability)]
    if not having:
        raise ParameterError(f"No registered backend supports {CAPABILITIES[capability]}.")
    return next((entry for entry in having if entry.accepts(data, None)), having[0])


def check_supported(plugin: BackendPlugin, needs: dict[str, str | None]) -> None:
    """Refuse the first capability of ``needs`` (capability -> the option that asks for it, None for
    the usual wording) that ``plugin`` lacks, with the message its declarations make."""
    for capability, option in needs.items():
        if not plugin.supports(capability):
            raise ParameterError(refusal(plugin, capability, _REGISTRY, option))


def backends() -> list[BackendPlugin]:
    """The registered backends, in the order the dispatcher asks them."""
    return list(_REGISTRY)


# the registered backends: one line each, the CPU backend first (asked last)
from . import local, matrix, spark  # noqa: E402

register_backend(local.PLUGIN)
register_backend(matrix.PLUGIN)
register_backend(spark.PLUGIN)

__all__ = ["BackendPlugin", "backends", "check_supported", "plugin_for", "register_backend", "select",
           "unregister_backend", "with_capability"]
