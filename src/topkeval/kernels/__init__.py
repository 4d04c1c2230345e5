"""Kernels: per-query statistics for every requested cutoff, in one pass over a grouped log.

``cpu`` is the default (numba, compiled once and cached on disk; small inputs run the same code
interpreted until a large one arrives, see ``jit``). ``grouping`` puts rows in query order,
``threads`` holds the shared thread pool, ``resample`` draws bootstrap and sign-flip weights. Every kernel returns the same
:class:`~topkeval.kernels.stats.QueryStats`, from which ``topkeval.metrics`` computes values.
"""
