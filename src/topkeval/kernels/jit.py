"""Compile the kernels with numba only when the input is large enough to pay for it.

Importing numba and loading its cache costs about half a second per process, several times the
work on a small log. So the kernels of :mod:`~topkeval.kernels.cpu` and
:mod:`~topkeval.kernels.grouping` are plain Python functions, decorated with :func:`kernel`: a call
whose arrays all have fewer than :data:`SMALL` elements runs the Python function as it is (the
same code, interpreted); the first larger call (or the first after interpreted calls have read
:data:`BUDGET` elements in all) imports numba and gives every registered kernel its compiled
version (``njit(cache=True, nogil=True)``; compiled code that calls a kernel calls the compiled
version), and from then on every call in the process is compiled. Input arrays reach compiled code
read-only, so each kernel compiles once per dtype, not once more for writable arrays.

Before that switch, a call whose kernel has a numpy version (:mod:`topkeval.kernels.vectorised`:
the kernels of a usual evaluation) runs that version instead, for inputs of up to
:data:`VECTOR_MAX` elements: whole-array numpy operations cost far less than compiling (seconds,
once after installation) or even loading the compiled kernels (about half a second per process).
A larger input, a kernel without a numpy version, or numpy work beyond :data:`VECTOR_BUDGET`
elements in all, compiles, and from then on the compiled kernels run.

``TOPKEVAL_JIT=1`` compiles from the first call, ``TOPKEVAL_JIT=0`` never compiles and never runs
the numpy versions, ``TOPKEVAL_JIT=numpy`` runs the numpy versions wherever there is one (and the
interpreted kernels elsewhere), whatever the size (for tests: the test suite compiles everything
and checks, in separate processes, that the interpreted kernels and the numpy versions give the
same numbers).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

#: Calls whose arrays all have fewer elements than this run interpreted until numba is loaded.
SMALL = 20_000

#: Once interpreted calls have looked at this many array elements in all (many small logs, or
#: many models of one), the kernels are compiled: from there on compiling is the cheaper choice.
BUDGET = 1_000_000

_interpreted = 0

#: Inputs of up to this many elements run the numpy version of their kernel (where there is one)
#: until the kernels are compiled: an evaluation of 2M rows takes about as long as compiling.
VECTOR_MAX = 2_000_000

#: Once the numpy versions have looked at this many elements in all, the kernels are compiled.
VECTOR_BUDGET = 50_000_000

_vectorised = 0

#: Per thread: whether an interpreted kernel is running (the kernels it calls run interpreted too,
#: and their arrays, parts of its own, are not counted again towards the budget).
_running = threading.local()

#: Seconds a first compiled call may take before a notice says that it compiles: said only when numba
#: actually compiles (a kernel not in its cache: the first run after installation), never when it
#: loads the kernels from its cache, however long that takes on a busy machine.
NOTICE_AFTER = 1.0
_noticed = threading.Event()

#: numba compilations started in this process (its "numba:compile" events: a load from the cache is none)
_compiles = 0
#: the first calls running now (:class:`_FirstCall`), whose NOTICE_AFTER may have passed
_waiting: set = set()
_listening = False


def _notice() -> None:
    if not _noticed.is_set():
        _noticed.set()
        import logging

        logging.getLogger("topkeval").warning(
            "topkeval: compiling its kernels for this machine (each the first time it is used after "
            "installation: seconds, more on a busy machine; cached for every later run)...")


def _listen() -> None:
    """Have numba say when it compiles (its ``numba:compile`` event, which a load from the cache
    never fires), once per process."""
    global _listening
    with _LOCK:
        if _listening:
            return
        from numba.core import event

        class Compiling(event.Listener):
            def on_start(self, ev) -> None:
                global _compiles
                _compiles += 1
                if any(call.overdue for call in list(_waiting)):
                    _notice()

            def on_end(self, ev) -> None:
                pass

        event.register("numba:compile", Compiling())
        _listening = True


class _FirstCall:
    """Around a first compiled call: the notice once it has taken :data:`NOTICE_AFTER` seconds and
    numba has compiled something meanwhile (whichever comes second says it)."""

    def __init__(self) -> None:
        self.overdue = False
        self._start = _compiles
        self._timer = threading.Timer(NOTICE_AFTER, self._late)
        self._timer.daemon = True

    def _late(self) -> None:
        self.overdue = True
        if _compiles > self._start:
            _notice()

    def __enter__(self):
        _listen()
        _waiting.add(self)
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        _waiting.discard(self)


class first_calls:
    """Around the first calls of numba dispatchers outside :class:`Kernel` (the resampling kernels,
    compiled on first use): the same notice once they take :data:`NOTICE_AFTER` seconds compiling,
    when one of them has not been compiled or loaded in this process yet."""

    def __init__(self, *dispatchers):
        self._call = _FirstCall() if not _noticed.is_set() and any(not d.signatures for d in dispatchers) else None

    def __enter__(self):
        if self._call is not None:
            self._call.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._call is not None:
            self._call.__exit__(*exc)

_KERNELS: list[Kernel] = []
_LOCK = threading.Lock()
_compiled = False


class Kernel:
    """A kernel: interpreted for small inputs until the first large one compiles every kernel.

    The Kernel object stays the module's name for the kernel, for Python callers and compiled
    callers alike (numba types it as its compiled dispatcher, see :func:`compile_all`). A compiled
    call passes its input arrays as read-only views, so that numba compiles one specialisation, not
    one for arrays that happen to be writable and another for read-only ones (pandas hands out
    read-only columns); ``outputs`` names the arguments the kernel writes into.
    """

    def __init__(self, fn, outputs: tuple[str, ...] = (), vectorised=None):
        import inspect

        self.py_func = fn
        self.vectorised = vectorised
        self.dispatcher: Any = None
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        names = list(inspect.signature(fn).parameters)
        self._inputs = [i for i, name in enumerate(names) if name not in outputs]

    def __call__(self, *args):
        if self.dispatcher is None:
            if getattr(_running, "interpreted", False):  # called by an interpreted kernel: counted there
                return self.py_func(*args)
            if self.vectorised is not None and use_vectorised(_largest(args)):
                return self.vectorised(*args)
            if not _wants_compiled(args):
                _running.interpreted = True
                try:
                    return self.py_func(*args)
                finally:
                    _running.interpreted = False
            compile_all()
        args = list(args)
        for i in self._inputs:
            if i < len(args):
                args[i] = _read_only(args[i])
        if self.dispatcher.signatures or _noticed.is_set():
            return self.dispatcher(*args)
        # first compiled call of this kernel in the process: loaded from numba's cache (a fraction of
        # a second, more on a busy machine), or compiled (seconds, once after install): said only then
        with _FirstCall():
            return self.dispatcher(*args)

    def __repr__(self) -> str:
        return f"<topkeval kernel {self.__module__}.{self.__name__}>"


def _read_only(value):
    if isinstance(value, np.ndarray):
        if value.flags.writeable:
            value = value.view()
            value.flags.writeable = False
        return value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple of inputs
        return type(value)(*(_read_only(v) for v in value))
    return value


def kernel(fn=None, *, outputs: tuple[str, ...] = (), vectorised=None):
    """Register ``fn`` as a kernel (see the module docstring); ``outputs`` names the arguments it
    writes into (every other array argument is passed read-only); ``vectorised``, a numpy version
    taking the same arguments, runs instead while the kernels are not compiled (:func:`use_vectorised`)."""
    if fn is None:
        return lambda f: kernel(f, outputs=outputs, vectorised=vectorised)
    k = Kernel(fn, outputs, vectorised)
    with _LOCK:
        _KERNELS.append(k)
        if _compiled:  # a module imported after the switch: compiled from the start
            k.dispatcher = _dispatcher(fn)
    return k


def _dispatcher(fn):
    """``njit(cache=True, nogil=True)(fn)``, typed from compiled callers by the plain types of their
    arguments: a constant argument (``0``) is typed by numba as a literal (``Literal[int](0)``), and
    each literal would compile the kernel once more (the largest kernel twice: seconds, after
    installation)."""
    from numba import njit
    from numba.core import types

    dispatcher = njit(cache=True, nogil=True)(fn)
    call_template = dispatcher.get_call_template

    def plain_call_template(args, kws):
        return call_template(tuple(types.unliteral(a) for a in args), {k: types.unliteral(v) for k, v in kws.items()})

    dispatcher.get_call_template = plain_call_template
    return dispatcher


def _largest(args) -> int:
    return max((a.size for a in args if isinstance(a, np.ndarray)), default=0)


def use_vectorised(size: int) -> bool:
    """Whether a call over ``size`` elements runs the numpy version of its kernel, where there is one
    (see the module docstring); counts the elements towards :data:`VECTOR_BUDGET`."""
    global _vectorised
    mode = os.environ.get("TOPKEVAL_JIT", "")
    if mode in ("0", "1", "numpy"):
        return mode == "numpy"
    if _compiled or size > VECTOR_MAX or _vectorised + size > VECTOR_BUDGET:
        return False
    _vectorised += size
    return True


def runs_compiled(size: int) -> bool:
    """Whether a kernel call over ``size`` elements would run compiled code (without counting it
    towards :data:`BUDGET`): for a caller choosing between a kernel and another way of its own (a
    kernel interpreted over millions of elements would take seconds)."""
    mode = os.environ.get("TOPKEVAL_JIT", "")
    if mode in ("0", "1", "numpy"):
        return mode == "1"
    return _compiled or size >= SMALL or _interpreted + size >= BUDGET


def _wants_compiled(args) -> bool:
    global _interpreted
    mode = os.environ.get("TOPKEVAL_JIT", "")
    if mode in ("0", "1", "numpy"):
        return mode == "1"
    largest = _largest(args)
    _interpreted += largest
    return largest >= SMALL or _interpreted >= BUDGET


def compile_all() -> None:
    """Give every kernel its numba dispatcher (``njit(cache=True, nogil=True)``): every call from
    then on runs compiled code, compiled on first use for its argument types and cached on disk."""
    global _compiled
    with _LOCK:
        if _compiled:
            return
        from numba import types
        from numba.extending import typeof_impl

        # compiled code that calls a kernel (a Kernel object, a global of its module) calls its
        # compiled dispatcher
        typeof_impl.register(Kernel)(lambda value, context: types.Dispatcher(value.dispatcher))
        for k in _KERNELS:
            k.dispatcher = _dispatcher(k.py_func)
        _compiled = True


def is_compiled() -> bool:
    """Whether the kernels of this process are compiled already."""
    return _compiled


def _new_lock_in_child() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # a fork during compile_all in another thread must not leave it held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)
