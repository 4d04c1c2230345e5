"""Progress bars: on a pseudo-terminal they appear, piped or under a machine-readable format they do not.

The command line and Python run in subprocesses whose stderr is either the slave end of a
pseudo-terminal (as in a terminal window) or a pipe; ``TOPKEVAL_PROGRESS_DELAY=0`` shows the bars
from the first moment, so that a short run shows them too.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys

import pytest

pty = pytest.importorskip("pty", reason="pseudo-terminals are a POSIX facility")

# summary_ci's bootstrap; compare's bootstrap and sign flips (one pass); the report's steps; a file read
BAR_WORDS = ("bootstrap resamples", "bootstrap and sign-flip resamples", "report: ", "reading ")


def _run(argv: list[str], *, terminal: bool, delay: str = "0", cwd=None) -> tuple[int, str, str]:
    """Run ``argv`` with stderr on a pseudo-terminal (``terminal``) or a pipe; stdout is a pipe."""
    env = dict(os.environ, TOPKEVAL_PROGRESS_DELAY=delay, TERM="xterm", COLUMNS="100")
    if not terminal:
        done = subprocess.run(argv, capture_output=True, env=env, cwd=cwd, timeout=300)
        return done.returncode, done.stdout.decode(), done.stderr.decode()
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, env=env, cwd=cwd)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    with proc.stdout:  # small outputs: the pipe's buffer holds them while stderr is read
        out = proc.stdout.read().decode()
    proc.wait(timeout=300)
    return proc.returncode, out, b"".join(chunks).decode(errors="replace")


def _bars(stderr: str) -> list[str]:
    return [w for w in BAR_WORDS if w in stderr]


CLI = [sys.executable, "-m", "topkeval"]


def test_cli_shows_bars_on_a_terminal(tmp_path):
    code, out, err = _run(CLI + ["demo", "--queries", "2000", "--report", str(tmp_path / "r.html")], terminal=True)
    assert code == 0, err
    assert {"bootstrap resamples", "bootstrap and sign-flip resamples", "report: "} <= set(_bars(err))
    assert "\x1b[" in err  # drawn in place, with terminal control sequences
    assert "\x1b[" not in out and "old_ranker" in out  # stdout (a pipe) holds the table only


def test_cli_shows_no_bar_when_piped_or_asked_not_to_or_machine_readable(tmp_path):
    code, out, err = _run(CLI + ["demo", "--queries", "2000"], terminal=False)
    assert code == 0 and _bars(err) == [] and "\x1b[" not in err + out
    for extra in (["--no-progress"], ["--format", "json"], ["--format", "csv"]):
        code, out, err = _run(CLI + ["demo", "--queries", "2000", *extra], terminal=True)
        assert code == 0, err
        assert _bars(err) == [], extra
    code, out, err = _run(CLI + ["demo", "--queries", "2000", "--format", "json", "--progress", "--report",
                                 str(tmp_path / "r.html")], terminal=True)
    assert code == 0 and "report: " in err  # asked for: shown, on stderr; stdout stays json
    assert out.lstrip().startswith("{")


def test_python_progress_true_shows_bars_and_the_default_does_not(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        "import sys, numpy as np, pandas as pd, topkeval as tk\n"
        "rng = np.random.default_rng(0)\n"
        "n = 4000 * 20\n"
        "log = pd.DataFrame({'query': np.repeat(np.arange(4000), 20), 'relevance': rng.random(n) < 0.2,\n"
        "                    'a': rng.random(n), 'b': rng.random(n)})\n"
        "log.to_parquet('log.parquet')\n"
        "res = tk.evaluate('log.parquet', ['recall@10', 'ndcg@10'], score=['a', 'b'], chunk_rows=20000,\n"
        "                  progress=sys.argv[1] == 'on')\n"
        "res.compare(baseline='a', progress=sys.argv[1] == 'on')\n"
        "print('done')\n")
    code, out, err = _run([sys.executable, str(script), "on"], terminal=True, cwd=tmp_path)
    assert code == 0 and "done" in out, err
    assert {"reading ", "bootstrap and sign-flip resamples"} <= set(_bars(err))
    code, out, err = _run([sys.executable, str(script), "off"], terminal=True, cwd=tmp_path)
    assert code == 0 and "done" in out, err
    assert _bars(err) == [] and "\x1b[" not in err


def test_quick_calls_never_show_a_bar():
    """Below the delay nothing is drawn, even on a terminal."""
    code, out, err = _run(CLI + ["demo", "--queries", "500"], terminal=True, delay="60")
    assert code == 0 and _bars(err) == [] and "\x1b[" not in err


def test_a_step_without_a_display_does_nothing():
    from topkeval import progress

    assert not progress.active()
    with progress.step("work", total=3) as bar:
        bar.advance()
        bar.describe("more work")
    assert progress.rows_read("some.parquet", 100) is None  # no display: no step


def test_progress_asked_for_on_a_pipe_writes_nothing_there():
    """--progress with stderr piped (a log file): no bar can be drawn there, and none of its leftovers
    (rich ends a display on a pipe with a blank line) is written either; stdout is unchanged."""
    code, out, err = _run(CLI + ["demo", "--queries", "2000", "--progress"], terminal=False)
    assert code == 0 and _bars(err) == [] and "\x1b[" not in err
    assert all(line.strip() for line in err.splitlines()), repr(err)  # (the kernels' first compile may speak)
    assert out == _run(CLI + ["demo", "--queries", "2000", "--no-progress"], terminal=False)[1]


def test_a_file_read_whole_shows_no_reading_bar_and_a_streamed_one_leaves_none_behind(tmp_path):
    """A parquet file small enough to be read whole is not streamed: no "reading" bar that would stand at
    0/N for the whole command; a streamed file's bar goes once the file is read (not left under compare)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 3000 * 20
    pd.DataFrame({"query": np.repeat(np.arange(3000), 20), "click": (rng.random(n) < 0.2).astype(int),
                  "a": rng.random(n), "b": rng.random(n)}).to_parquet(tmp_path / "log.parquet")
    code, out, err = _run(CLI + ["compare", str(tmp_path / "log.parquet"), "--relevance", "click", "--baseline", "a",
                                 "--score", "b"], terminal=True)
    assert code == 0, err
    assert "sign-flip resamples" in err and "reading " not in err
    code, out, err = _run(CLI + ["compare", str(tmp_path / "log.parquet"), "--relevance", "click", "--baseline", "a",
                                 "--score", "b", "--chunk-rows", "20000"], terminal=True)
    assert code == 0, err
    assert "reading " not in err[err.index("sign-flip resamples"):]  # gone before the resampling
