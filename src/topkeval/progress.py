"""Progress bars for long work: on stderr, drawn by rich, only where someone is watching.

A public entry point that can run for seconds (``evaluate`` of a large file, ``compare``,
``summary_ci``, ``compare_all``, ``report``; the CLI's commands) opens a display with
:func:`shown`; the work inside reports its steps with :func:`step`, wherever it runs (the
resampling threads, the streaming of a file, the sections of the report). Without an open display
a step does nothing and costs nothing, so the library is silent unless asked:

* in Python, ``progress=True`` opens the display (a terminal or a notebook);
* the CLI opens it when stderr is a terminal and the output is for reading (``--format table``
  or ``markdown``), never when stderr is piped or redirected and never under a machine-readable
  format (json, csv, trec, latex); ``--progress`` / ``--no-progress`` decide otherwise.

The bars appear only once a call has run for :data:`DELAY` seconds (``TOPKEVAL_PROGRESS_DELAY``),
so quick calls never flicker, and they vanish when the call ends (the output stays clean).
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from contextvars import ContextVar

#: Seconds a call runs before its bars appear.
DELAY = 1.0

_current: ContextVar[_Display | None] = ContextVar("topkeval_progress", default=None)


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("TOPKEVAL_PROGRESS_DELAY", DELAY)))
    except ValueError:
        return DELAY


class _Display:
    """One rich Progress on stderr, started after the delay, transient."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._timer = threading.Timer(_delay(), self._start)
        self._timer.daemon = True
        self._timer.start()

    def _start(self) -> None:
        console = self.progress.console
        if not (console.is_terminal or console.is_jupyter):
            return  # nothing can be drawn on a pipe or a file, and rich would leave a blank line there
        with self._lock:
            if not self._closed and not self._started:
                self._started = True
                self.progress.start()

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._started:
                self.progress.stop()


class Step:
    """A step of the work: ``advance()`` as parts finish (thread-safe); a no-op without a display."""

    def __init__(self, display: _Display | None, description: str, total: float | None):
        self._display = display
        self._task = None if display is None else display.progress.add_task(description, total=total)

    def advance(self, amount: float = 1) -> None:
        if self._task is not None and self._display is not None:
            self._display.progress.advance(self._task, amount)

    def describe(self, description: str) -> None:
        """Say what the step is doing now."""
        if self._task is not None and self._display is not None:
            self._display.progress.update(self._task, description=description)

    def __enter__(self) -> Step:
        return self

    def __exit__(self, *exc) -> None:
        if self._task is not None and self._display is not None:
            self._display.progress.remove_task(self._task)
            self._task = None


def step(description: str, total: float | None = None) -> Step:
    """A step of ``total`` parts (None: a spinner) under the open display, or a no-op without one."""
    return Step(_current.get(), description, total)


def active() -> bool:
    """Whether a display is open for this call (for work that costs something only to report)."""
    return _current.get() is not None


@contextmanager
def shown(enabled: bool | None):
    """Open a display for the duration of a call when ``enabled`` (inside another one: that one)."""
    if not enabled or _current.get() is not None:
        yield
        return
    display = _Display()
    token = _current.set(display)
    try:
        yield
    finally:
        _current.reset(token)
        display.close()


def rows_read(name: str, total: int | None):
    """A function that advances a "reading NAME" step by the rows of each streamed batch (``total``
    rows in all, None if unknown), or None without an open display. The step appears with the first
    batch (a file read whole is not streamed: no bar standing at 0 for the whole command), and its
    ``done()`` removes it once the file is read (no bar left on screen under the steps that follow)."""
    if _current.get() is None:
        return None
    opened: list[Step] = []

    def advance(rows: float) -> None:
        if not opened:
            opened.append(step(f"reading {name}", total=total))
        opened[0].advance(rows)

    def done() -> None:
        while opened:
            opened.pop().__exit__(None, None, None)

    advance.done = done  # type: ignore[attr-defined]
    return advance
