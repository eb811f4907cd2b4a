"""The suite itself: every test function asserts something (a small AST scan of tests/)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: Calls that assert: pytest.raises / fail / warns / approx, numpy's assert_*, golden files.
ASSERTING_CALLS = {"raises", "fail", "warns", "approx", "golden"}


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _asserts(fn: ast.FunctionDef, helpers: set[str]) -> bool:
    """Whether `fn` holds an `assert`, an asserting call or a call of an asserting helper."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = _call_name(node) or ""
            if name in ASSERTING_CALLS or name.startswith("assert") or name in helpers:
                return True
    return False


def _functions() -> list[tuple[Path, ast.FunctionDef]]:
    out = []
    for path in sorted(TESTS.glob("**/*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out += [(path, n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    return out


def silent_tests() -> list[str]:
    """``path:line: name`` of the test functions that assert nothing.

    Helpers (non-test functions, in any test module) count as asserting when they assert,
    directly or through other helpers (iterated to a fixed point).
    """
    functions = _functions()
    helpers: set[str] = set()
    grew = True
    while grew:
        grew = False
        for _, fn in functions:
            if not fn.name.startswith("test_") and fn.name not in helpers and _asserts(fn, helpers):
                helpers.add(fn.name)
                grew = True
    return [f"{path.relative_to(TESTS)}:{fn.lineno}: {fn.name}" for path, fn in functions
            if fn.name.startswith("test_") and not _asserts(fn, helpers)]


def test_every_test_asserts():
    assert silent_tests() == []


def test_the_scan_finds_a_test_that_asserts_nothing():
    source = ("def helper(x):\n    assert x\n\n"
              "def test_a():\n    helper(1)\n\n"
              "def test_b():\n    1\n")
    tree = ast.parse(source)
    fns = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    helpers = {"helper"} if _asserts(fns["helper"], set()) else set()
    assert _asserts(fns["test_a"], helpers)
    assert not _asserts(fns["test_b"], helpers)
