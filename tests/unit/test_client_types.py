"""argwatch.client's typed surface: codes and shapes that follow the proto, one exception tree, typed problems."""

from __future__ import annotations

from typing import get_args

import pytest

import argwatch.client.gates
from argwatch.client import (
    ArgwatchError,
    GatewayError,
    GatewayRejectedRequest,
    GatewayUnavailable,
    InvalidInput,
    Outcome,
    Problem,
    ProblemCode,
    Session,
    Shape,
    from_mcp,
)
from argwatch.v1 import gateway_pb2 as pb


def test_the_problem_codes_and_shapes_are_the_protos_names() -> None:
    """A code or shape added to gateway.proto must be added to the Literals, or users' checks miss it."""
    assert set(get_args(ProblemCode)) == {name.removeprefix("PROBLEM_CODE_") for name, _ in pb.ProblemCode.items()}
    assert set(get_args(Shape)) == {name.removeprefix("SHAPE_") for name, _ in pb.Shape.items()}


def test_an_outcome_reads_its_problems_as_plain_values_and_keeps_the_verdict() -> None:
    verdict = pb.ValidateResponse(
        call_id="call_1",
        decision=pb.DECISION_REJECT,
        problems=[
            pb.Problem(
                code=pb.PROBLEM_CODE_OUT_OF_SET,
                argument="reason_code",
                value_set="refunds.reason_codes",
                shape=pb.SHAPE_RETIRED,
                message="reason_code: retired",
                value='"CUSTOMER_UNHAPPY"',
                suggestion="OTHER",
            ),
            pb.Problem(code=99, message="a code newer than this client"),  # type: ignore[arg-type]
        ],
    )
    outcome = Outcome(False, "try OTHER", verdict, Session("conv-1"))
    retired, newer = outcome.problems
    assert retired == Problem(
        code="OUT_OF_SET",
        argument="reason_code",
        value_set="refunds.reason_codes",
        shape="RETIRED",
        message="reason_code: retired",
        value='"CUSTOMER_UNHAPPY"',
        suggestion="OTHER",
        in_set_normalised=False,
        expected="",
    )
    assert (newer.code, newer.shape) == ("UNSPECIFIED", "UNSPECIFIED")
    assert outcome.verdict is verdict and outcome.call_id == "call_1"


def test_one_exception_tree_that_keeps_what_callers_caught_before() -> None:
    """Every error is an ArgwatchError; the gateway's are RuntimeErrors (as the gates' always were), an input
    that cannot be sent a ValueError (as the adapters' always were); the gates export the same class."""
    assert issubclass(GatewayUnavailable, GatewayError) and issubclass(GatewayRejectedRequest, GatewayError)
    assert issubclass(GatewayError, ArgwatchError) and issubclass(GatewayError, RuntimeError)
    assert issubclass(InvalidInput, ArgwatchError) and issubclass(InvalidInput, ValueError)
    assert argwatch.client.gates.GatewayUnavailable is GatewayUnavailable
    with pytest.raises(InvalidInput, match="not an MCP tools/call request"):
        from_mcp({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
