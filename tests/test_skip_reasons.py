"""Skip and xfail reasons are read by everyone who runs the tests: they name no path of a machine."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import conftest

TESTS = Path(__file__).parent

#: An absolute path (/work/shared, /home/x, C:\\x) or one in a home folder (~/x).
MACHINE_PATH = re.compile(r"(?<![\w.])/[A-Za-z0-9_.-]+/|(?<![\w.])~/|\b[A-Za-z]:\\")

SKIPPERS = {"skip", "importorskip", "skipif", "xfail", "fail"}


def _reasons(tree: ast.AST):
    """(line, node) of every reason given to pytest.skip / importorskip / mark.skipif / mark.xfail."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in SKIPPERS:
            continue
        args = [kw.value for kw in node.keywords if kw.arg in ("reason", "msg")]
        if name == "skip" and node.args:
            args.append(node.args[0])
        yield from ((node.lineno, arg) for arg in args)


def test_skip_reasons_name_no_machine_path():
    found = []
    for path in sorted(TESTS.glob("*.py")):
        for line, node in _reasons(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.name}:{line}"
            if isinstance(node, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in node.values):
                found.append(f"{where}: an f-string (a path could be put in it): write the reason out")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MACHINE_PATH.search(node.value):
                found.append(f"{where}: {node.value!r}")
    assert not found, found
    assert MACHINE_PATH.search("/work/shared is absent") and not MACHINE_PATH.search(".ci/run installs chromium")


def test_missing_shared_folder_skips_without_its_path(request, monkeypatch, tmp_path):
    missing = tmp_path / "no-such-shared"
    monkeypatch.setattr(conftest, "SHARED", missing)
    with pytest.raises(pytest.skip.Exception) as info:
        request.getfixturevalue("shared_dir")
    message = str(info.value)
    assert str(missing) not in message and not MACHINE_PATH.search(message), message
    assert "TOPKEVAL_SHARED" in message
