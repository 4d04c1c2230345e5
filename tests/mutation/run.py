"""The mutation check: would the tests catch a wrong number?

Each mutation of ``tests/mutation/mutations.py`` replaces one exact snippet of the source (a
formula, a comparison, a constant) with a wrong one. This script applies each, one at a time, to a
scratch copy of ``src/`` (the checkout's files are never written: a copy in a temporary folder is
put first on the path), runs the tests that should catch it (``pytest -x``), and restores the file.
A mutation is *killed* when those tests fail (or run past the time limit), and *survives* when they
pass. Before the mutations, the same tests run on the unmutated copy and must pass, so that a kill
means something.

Kernels run interpreted (``TOPKEVAL_JIT=0``: no numba compile per mutation; ``jit=True`` on a
mutation compiles them), hypothesis draws a fixed, small number of examples, derandomized and
without shrinking, so a run is deterministic. Each pytest run is a fork of this process, which has
imported numpy, pandas, scipy, pyarrow, numba, torch, matplotlib, rich, scikit-learn, hypothesis and
pytest once, compiled the brute-force reference's numba argsort, and frozen its objects out of the
garbage collector (but never imported topkeval, so each run imports the mutated copy): a run costs
its tests, not a fresh interpreter's imports (``--no-fork`` starts a new interpreter per run
instead, and is the only way without ``os.fork``).

The check fails (exit status 1) when a mutation that is not marked equivalent survives, when the
unmutated tests fail, when a mutated run errs (a mutation that does not import, a test that does
not exist), or when an original snippet is not found exactly once in the source: a refactor that
moves a formula must move its mutation too, so the list cannot rot silently. A mutation whose
tests all skip here (no torch, no ../shared folder) is reported as not checked.

Usage::

    python tests/mutation/run.py --jobs 2              # every mutation (CI; 2 to 3 minutes on 2 cores)
    python tests/mutation/run.py --sample 40           # 40 of them, every module in turn, fixed seed
    python tests/mutation/run.py --only compare        # the mutations of one file (or one id: compare.3)
    python tests/mutation/run.py --check               # only that every snippet is found once
    python tests/mutation/run.py --list                # the mutations and their tests

See docs/contributing/mutation.md (the docs' "For contributors" section) for adding mutations with new code.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "topkeval"
sys.path.insert(0, str(HERE))

from mutations import MUTATIONS, Mutation  # noqa: E402

#: What a forked run would otherwise import itself (topkeval never: each run imports the mutated copy).
PRELOAD = ("numpy", "pandas", "scipy.stats", "scipy.sparse", "pyarrow", "pyarrow.compute", "pyarrow.csv",
           "pyarrow.parquet", "numba", "hypothesis", "pytest", "torch", "rich.console", "rich.table", "rich.progress",
           "sklearn.metrics")


def snippet_problems(mutations: list[Mutation]) -> list[str]:
    """Every mutation whose original snippet is not found exactly once (or whose file is gone), and
    every malformed entry."""
    problems = []
    ids = [m.id for m in mutations]
    problems += [f"{i}: the id is used twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for m in mutations:
        path = PACKAGE / m.file
        if not path.is_file():
            problems.append(f"{m.id}: {m.file} does not exist")
            continue
        count = path.read_text(encoding="utf-8").count(m.original)
        if count != 1:
            problems.append(f"{m.id}: the original snippet is found {count} times in {m.file} (needs exactly 1): "
                            f"{m.original!r}")
        if m.original == m.replacement:
            problems.append(f"{m.id}: the replacement equals the original")
        if not m.selection() or any(part.startswith("-") for part in m.selection()):
            problems.append(f"{m.id}: tests must be test files or node ids (no options): {m.tests!r}")
    return problems


def sample(mutations: list[Mutation], size: int, seed: int) -> list[Mutation]:
    """``size`` mutations, every file's in turn (round robin over the files, each file's list
    shuffled with ``seed``), so that a small sample still touches every module."""
    rng = random.Random(seed)
    by_file: dict[str, list[Mutation]] = defaultdict(list)
    for m in mutations:
        by_file[m.file].append(m)
    for items in by_file.values():
        rng.shuffle(items)
    files = sorted(by_file)
    rng.shuffle(files)
    out: list[Mutation] = []
    while len(out) < size and any(by_file.values()):
        for f in files:
            if by_file[f] and len(out) < size:
                out.append(by_file[f].pop())
    return out


def source_digest() -> str:
    """A digest of every file under src/ (to show that the checkout was left as it was)."""
    h = hashlib.sha256()
    for path in sorted(SRC.rglob("*.py")):
        h.update(str(path.relative_to(SRC)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


class Scratch:
    """A copy of src/ in a temporary folder, to mutate one file at a time."""

    def __init__(self, base: Path, index: int):
        self.root = base / f"copy{index}"
        shutil.copytree(SRC, self.root / "src")
        self.src = self.root / "src"
        self.log = self.root / "pytest.log"

    def env(self, m: Mutation | None, examples: int) -> dict[str, str]:
        """The variables a run sets (on top of this process's)."""
        return {"PYTHONPATH": str(self.src), "TOPKEVAL_JIT": "1" if m is not None and m.jit else "0",
                "TOPKEVAL_HYPOTHESIS_EXAMPLES": str(m.examples if m is not None and m.examples else examples),
                "TOPKEVAL_HYPOTHESIS_DERANDOMIZE": "1", "PYTHONDONTWRITEBYTECODE": "1"}

    def apply(self, m: Mutation) -> tuple[Path, bytes, os.stat_result]:
        path = self.src / "topkeval" / m.file
        original = path.read_bytes()
        stat = path.stat()
        text = original.decode("utf-8")
        assert text.count(m.original) == 1, m.id
        path.write_text(text.replace(m.original, m.replacement), encoding="utf-8")
        # a new modification time: numba's on-disk cache (keyed by the file's time and size) must
        # never hand the mutant the compiled code of the original
        now = time.time()
        os.utime(path, (now, max(now, stat.st_mtime + 1)))
        return path, original, stat

    @staticmethod
    def restore(path: Path, original: bytes, stat: os.stat_result) -> None:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def pytest_args(selection: list[str]) -> list[str]:
    return ["-x", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts=",
            "-W", "ignore::pytest.PytestAssertRewriteWarning", *selection]


@dataclass
class Running:
    """A pytest run in progress: its process (own process group), the copy it uses, when it started."""

    pid: int
    scratch: Scratch
    started: float
    timeout: float
    proc: subprocess.Popen | None = None  # with --no-fork
    done: object = None  # called with (status, seconds, output)


def start(scratch: Scratch, env: dict[str, str], selection: list[str], fork: bool) -> tuple[int, subprocess.Popen | None]:
    """Start pytest on ``selection`` with ``env``, output to the copy's log; return its pid."""
    if not fork:
        with open(scratch.log, "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "pytest", *pytest_args(selection)], cwd=ROOT,
                                    env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        return proc.pid, proc
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid, None
    code = 3
    try:  # the child: its own process group, output to the log, the copy first on the path
        os.setsid()
        fd = os.open(scratch.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.environ.update(env)
        sys.path.insert(0, env["PYTHONPATH"])
        os.chdir(ROOT)
        import pytest

        import topkeval  # the copy, never an installed topkeval (an editable install's finder comes later)

        if not topkeval.__file__.startswith(env["PYTHONPATH"]):
            print(f"topkeval imported from {topkeval.__file__}, not from the copy {env['PYTHONPATH']}")
            os._exit(4)
        code = int(pytest.main(pytest_args(selection)))
    except BaseException:  # noqa: BLE001 (whatever happens, the child must end here, never return)
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def finished(run: Running) -> int | None:
    """The exit status of ``run`` if it ended, else None."""
    if run.proc is not None:
        return run.proc.poll()
    pid, status = os.waitpid(run.pid, os.WNOHANG)
    return os.waitstatus_to_exitcode(status) if pid else None


def kill(run: Running) -> None:
    """End a run this script started, and its children (its own process group)."""
    try:
        os.killpg(run.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if run.proc is not None:
        run.proc.wait()
    else:
        try:
            os.waitpid(run.pid, 0)
        except ChildProcessError:
            pass


def outcome(code: int | None, output: str) -> str:
    """passed, failed, timeout, skipped (every test skipped) or error (pytest's exit status 2 to 5:
    interrupted, internal error, usage error, no test collected; or a crash)."""
    if code is None:
        return "timeout"
    if code == 0:
        summary = output.strip().splitlines()[-1] if output.strip() else ""
        return "passed" if " passed" in summary else "skipped"
    return "failed" if code == 1 else "error"


def schedule(jobs: list[tuple], copies: list[Scratch], fork: bool) -> None:
    """Run ``jobs`` ((prepare, env, selection, timeout, done) tuples) on the copies, one at a time
    per copy. ``prepare(scratch)`` mutates the copy and returns the function that restores it;
    ``env(scratch)`` gives the run's variables; ``done(status, seconds, output)`` receives each result.
    Single-threaded: fork is safe here."""
    pending = list(jobs)
    free = list(copies)
    running: list[Running] = []
    try:
        while pending or running:
            while pending and free:
                prepare, env, selection, timeout, done = pending.pop(0)
                scratch = free.pop(0)
                restore = prepare(scratch)
                try:
                    pid, proc = start(scratch, env(scratch), selection, fork)
                except BaseException:
                    restore()
                    raise
                run = Running(pid, scratch, time.perf_counter(), timeout, proc, (done, restore))
                running.append(run)
            time.sleep(0.02)
            for run in list(running):
                code = finished(run)
                late = code is None and time.perf_counter() - run.started > run.timeout
                if code is None and not late:
                    continue
                if late:
                    kill(run)
                seconds = time.perf_counter() - run.started
                running.remove(run)
                done, restore = run.done  # type: ignore[misc]
                restore()
                output = run.scratch.log.read_text(errors="replace") if run.scratch.log.exists() else ""
                free.append(run.scratch)
                done(outcome(None if late else code, output), seconds, output[-3000:])
    finally:  # interrupted: end the runs, put the copies back
        for run in running:
            kill(run)
            run.done[1]()  # type: ignore[index]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, help="run this many mutations (every file in turn), not all")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    parser.add_argument("--only", action="append", help="one mutation by its id (cpu.2), or those whose id or file "
                        "contains this text (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, each on its own copy (default 1)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per mutation before it counts as "
                        "killed by a time-out (default 120)")
    parser.add_argument("--examples", type=int, default=20, help="hypothesis examples per test (default 20)")
    parser.add_argument("--no-fork", action="store_true", help="a new interpreter per run (slower)")
    parser.add_argument("--equivalent", action="store_true", help="run the mutations marked equivalent instead: "
                        "each must survive (one that is killed is not equivalent)")
    parser.add_argument("--check", action="store_true", help="only check that every original snippet is found once")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--json", help="write the results to this file as JSON")
    args = parser.parse_args(argv)

    if args.list:
        for m in MUTATIONS:
            mark = f"  [equivalent: {m.equivalent}]" if m.equivalent else ""
            print(f"{m.id:<16} {m.file:<24} {m.original!r} -> {m.replacement!r}\n{'':<16} tests: {m.tests}{mark}")
        return 0
    problems = snippet_problems(MUTATIONS)
    equivalent = [m for m in MUTATIONS if m.equivalent is not None]
    files = sorted({m.file for m in MUTATIONS})
    print(f"{len(MUTATIONS)} mutations of {len(files)} files ({len(equivalent)} marked equivalent)")
    if problems:
        print("\n".join(["Mutations to update in tests/mutation/mutations.py:", *problems]))
        return 1
    if args.check:
        print("every original snippet is found exactly once")
        return 0
    chosen = [m for m in MUTATIONS if (m.equivalent is not None) == args.equivalent]
    if args.only:  # an exact id selects that mutation alone (cpu.2, not cpu.21); other text any id or file containing it
        ids = {m.id for m in MUTATIONS}
        chosen = [m for m in chosen if m.id in args.only
                  or any(text not in ids and (text in m.id or text in m.file) for text in args.only)]
    if args.sample is not None:
        chosen = sample(chosen, args.sample, args.seed)
    if not chosen:
        print("no mutation selected")
        return 1
    fork = hasattr(os, "fork") and not args.no_fork
    if fork:
        for name in PRELOAD:
            try:
                __import__(name)
            except ImportError:
                pass
        # the brute-force reference compiles numba's own argsort (ties="ranx") on first use, about 1.5 s: once
        # here, for every forked run (its tests import this module, already loaded)
        sys.path.insert(0, str(ROOT / "tests"))
        try:
            import reference

            reference.numba_argsort([1.0, 0.0])
        except (ImportError, AttributeError):
            pass
        try:  # the Agg backend, which topkeval's plots choose when none is set (pyplot: 0.4 s a run otherwise)
            import matplotlib

            matplotlib.use("Agg", force=False)
            import matplotlib.pyplot  # noqa: F401
        except ImportError:
            pass
        assert "topkeval" not in sys.modules  # each run must import the mutated copy
        # what was loaded here is never collected again: pytest's garbage collections at the end of each
        # run no longer walk it (0.3 s a run)
        import gc

        gc.freeze()

    before = source_digest()
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="topkeval-mutation-"))
    results: list[dict] = []
    try:
        jobs = max(1, min(args.jobs, len(chosen)))
        copies = [Scratch(base, i) for i in range(jobs)]
        probe = subprocess.run([sys.executable, "-c", "import topkeval; print(topkeval.__file__)"], cwd=ROOT,
                               env={**os.environ, **copies[0].env(None, args.examples)}, capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(copies[0].src)):
            print(f"topkeval is not imported from the scratch copy: {probe.stdout.strip() or probe.stderr.strip()}")
            return 1

        # the tests of every chosen mutation pass on the unmutated source, in the same settings
        groups: dict[tuple, list[Mutation]] = defaultdict(list)
        for m in chosen:
            groups[(m.jit, m.examples)].append(m)
        baseline: list[tuple[str, str]] = []
        plan = []
        for group in groups.values():
            selection = list(dict.fromkeys(p for m in group for p in m.selection()))
            for part in (selection[i::jobs] for i in range(min(jobs, len(selection)))):
                plan.append((lambda scratch: (lambda: None), lambda scratch, m=group[0]: scratch.env(m, args.examples),
                             part, args.timeout * 4, lambda status, seconds, tail: baseline.append((status, tail))))
        t0 = time.perf_counter()
        schedule(plan, copies, fork)
        print(f"unmutated: the tests of the {len(chosen)} mutations pass ({time.perf_counter() - t0:.0f} s)"
              if all(status in ("passed", "skipped") for status, _ in baseline) else "unmutated: FAILED")
        for status, tail in baseline:
            if status not in ("passed", "skipped"):
                print(tail)
                print(f"the tests {status} without any mutation: fix them first")
                return 1

        def job(m: Mutation):
            def prepare(scratch: Scratch):
                path, original, stat = scratch.apply(m)
                return lambda: Scratch.restore(path, original, stat)

            def done(status: str, seconds: float, tail: str) -> None:
                result = {"failed": "killed", "timeout": "killed (time-out)", "passed": "SURVIVED", "error": "ERROR",
                          "skipped": "not checked (skipped)"}[status]
                if args.equivalent:  # these must survive
                    result, status = {"passed": ("survived (equivalent)", "ok"), "failed": ("KILLED", "passed"),
                                      "timeout": ("KILLED (time-out)", "passed")}.get(status, (result, status))
                results.append({"id": m.id, "file": m.file, "outcome": result, "seconds": round(seconds, 1),
                                "tests": m.tests})
                print(f"{len(results):>4}/{len(chosen)} {m.id:<16} {result:<22} {seconds:6.1f} s", flush=True)
                if status in ("passed", "error"):
                    print(f"     {m.file}: {m.original!r} -> {m.replacement!r}\n     tests: {m.tests}")
                    if status == "error":
                        print("     " + tail.replace("\n", "\n     "))

            return prepare, lambda scratch: scratch.env(m, args.examples), m.selection(), m.timeout or args.timeout, done

        schedule([job(m) for m in chosen], copies, fork)
    except KeyboardInterrupt:
        print("interrupted")
        return 130
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if source_digest() != before:  # never expected: the copies are mutated, not the checkout
        print("src/ changed during the run: check `git status`")
        return 1
    elapsed = time.perf_counter() - started
    killed = sum(r["outcome"].lower().startswith("killed") for r in results)
    survived = [r for r in results if r["outcome"].lower().startswith("survived")]
    errors = [r for r in results if r["outcome"] == "ERROR"]
    unchecked = [r for r in results if r["outcome"].startswith("not checked")]
    print(f"\napplied {len(results)}, killed {killed}, survived {len(survived)}, errors {len(errors)}"
          + (f", not checked {len(unchecked)} (their tests skip here: {', '.join(r['id'] for r in unchecked)})"
             if unchecked else "")
          + ("" if args.equivalent else f"; {len(equivalent)} more marked equivalent (not run)") + f"; {elapsed:.0f} s "
          f"({jobs} job{'s' if jobs > 1 else ''}{', forked runs' if fork else ''})")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "equivalent": [m.id for m in equivalent],
                                               "seconds": round(elapsed, 1)}, indent=2))
    if args.equivalent:
        wrong = [r["id"] for r in results if r["outcome"].startswith("KILLED")]
        if wrong or errors:
            print(f"Marked equivalent but killed: {', '.join(wrong)} (remove the mark, or fix its tests)")
            return 1
        return 0
    if survived or errors:  # (not with --equivalent: returned above)
        print("Surviving mutations: add a test that catches each (or mark it equivalent, saying why).")
        return 1
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)  # a killed run still ends its tests and removes its copies
    sys.exit(main())
