"""Policy test results as text (a diff per failed case: `-` expected, not got; `+` got, not expected) or as JSON."""

from __future__ import annotations

from typing import Any

from argwatch.server.policytest.cases import ExpectedProblem
from argwatch.server.policytest.run import CaseResult, GotProblem


def as_text(results: list[CaseResult]) -> str:
    lines = []
    for result in results:
        if result.passed:
            continue
        case = result.case
        lines.append(f"FAIL {case.where}: {case.name}")
        if result.decision_differs:
            lines.append(f"  decision: expected {case.decision}, got {result.decision}")
        if result.missing or result.unexpected:
            lines.append("  problems:")
            lines.extend(f"    - {_expected(problem)}" for problem in result.missing)
            lines.extend(f"    + {_got(problem)}" for problem in result.unexpected)
        if result.skipped_differs:
            assert case.skipped is not None
            lines.append("  skipped checks:")
            lines.extend(f"    - {check} at {path}" for path, check in sorted(set(case.skipped) - set(result.skipped)))
            lines.extend(f"    + {check} at {path}" for path, check in sorted(set(result.skipped) - set(case.skipped)))
    failed = sum(not result.passed for result in results)
    files = len({result.case.file for result in results})
    summary = f"{len(results) - failed} passed, {failed} failed ({len(results)} cases in {files} file(s))"
    return "\n".join([*lines, summary])


def as_json(results: list[CaseResult]) -> dict[str, Any]:
    return {
        "passed": sum(result.passed for result in results),
        "failed": sum(not result.passed for result in results),
        "cases": [_case_json(result) for result in results],
    }


def _case_json(result: CaseResult) -> dict[str, Any]:
    case = result.case
    return {
        "file": case.file,
        "line": case.line,
        "name": case.name,
        "passed": result.passed,
        "expected": {
            "decision": case.decision,
            "problems": [_problem_json(problem) for problem in case.problems],
            **({"skipped": [{"path": p, "check": c} for p, c in case.skipped]} if case.skipped is not None else {}),
        },
        "got": {
            "decision": result.decision,
            "problems": [
                {"code": p.code, "path": p.path, "shape": p.shape, "message": p.message} for p in result.problems
            ],
            "skipped": [{"path": p, "check": c} for p, c in result.skipped],
        },
        "missing": [_problem_json(problem) for problem in result.missing],
        "unexpected": [{"code": p.code, "path": p.path, "shape": p.shape} for p in result.unexpected],
    }


def _problem_json(problem: ExpectedProblem) -> dict[str, Any]:
    shown: dict[str, Any] = {"code": problem.code, "path": problem.path}
    if problem.shape is not None:
        shown["shape"] = problem.shape
    return shown


def _expected(problem: ExpectedProblem) -> str:
    shape = f" ({problem.shape})" if problem.shape else ""
    return f"{problem.code} at {problem.path or '(the call)'}{shape}"


def _got(problem: GotProblem) -> str:
    shape = f" ({problem.shape})" if problem.shape else ""
    return f"{problem.code} at {problem.path or '(the call)'}{shape}: {problem.message}"
