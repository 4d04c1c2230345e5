"""Compile the kernels with numba only when the input is large enough to pay for it.

Importing numba and loading its cache costs about half a second per process, several times the
work on a small log. So the kernels of :mod:`~topkeval.kernels.cpu` and
:mod:`~topkeval.kernels.grouping` are plain Python functions, decorated with :func:`kernel`: a call
whose arrays all have fewer than :data:`SMALL` elements runs the Python function as it is (the
same code, interpreted); the first larger call (or the first after interpreted calls have read
:data:`BUDGET` elements in all) imports numba, swaps every registered kernel in its module for the
compiled version (``njit(cache=True, nogil=True)``, so compiled code calls compiled
code), and from then on every call in the process is compiled.

``TOPKEVAL_JIT=1`` compiles from the first call, ``TOPKEVAL_JIT=0`` never compiles (both for
tests: the test suite compiles everything and checks, in a separate process, that the
interpreted kernels give the same numbers).
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np

#: Calls whose arrays all have fewer elements than this run interpreted until numba is loaded.
SMALL = 20_000

#: Once interpreted calls have looked at this many array elements in all (many small logs, or
#: many models of one), the kernels are compiled: from there on compiling is the cheaper choice.
BUDGET = 1_000_000

_interpreted = 0

_KERNELS: list[Kernel] = []
_LOCK = threading.Lock()
_compiled = False


class Kernel:
    """A kernel: interpreted for small inputs until the first large one compiles every kernel."""

    def __init__(self, fn):
        self.py_func = fn
        self.dispatcher = None
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args):
        if self.dispatcher is None:
            if not _wants_compiled(args):
                return self.py_func(*args)
            compile_all()
        return self.dispatcher(*args)

    def __repr__(self) -> str:
        return f"<topkeval kernel {self.__module__}.{self.__name__}>"


def kernel(fn):
    """Register ``fn`` as a kernel (see the module docstring)."""
    k = Kernel(fn)
    with _LOCK:
        _KERNELS.append(k)
        if _compiled:  # a module imported after the switch: compiled from the start
            from numba import njit

            k.dispatcher = njit(cache=True, nogil=True)(fn)
            return k.dispatcher
    return k


def _wants_compiled(args) -> bool:
    global _interpreted
    mode = os.environ.get("TOPKEVAL_JIT", "")
    if mode in ("0", "1"):
        return mode == "1"
    largest = max((a.size for a in args if isinstance(a, np.ndarray)), default=0)
    _interpreted += largest
    return largest >= SMALL or _interpreted >= BUDGET


def compile_all() -> None:
    """Swap every kernel for its numba-compiled version, in its module too."""
    global _compiled
    with _LOCK:
        if _compiled:
            return
        from numba import njit

        for k in _KERNELS:
            k.dispatcher = njit(cache=True, nogil=True)(k.py_func)
        for k in _KERNELS:  # compiled kernels find the compiled versions of the kernels they call
            setattr(sys.modules[k.__module__], k.__name__, k.dispatcher)
        _compiled = True


def is_compiled() -> bool:
    """Whether the kernels of this process are compiled already."""
    return _compiled


def _new_lock_in_child() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # a fork during compile_all in another thread must not leave it held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)
