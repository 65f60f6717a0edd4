"""The gate's own cost per call, in-process, in microseconds: membership, + schema, + cached look-up and two rules.

No RPC: the Validator is called directly on a decoded call, so the figures are
what the checks cost, to set against the ~200-300 us of server CPU an RPC costs
here (docs/performance.md). Run `bench/validate.py --gate` for the same gate over
gRPC against a bare echo.

    python bench/gate.py
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_server import bench_settings
from figures import report
from gate_policy import start_records, write_policy
from timing import best_micros
from validate import payload

from argwatch.server.edge import wire
from argwatch.server.policy.loader import load_policy
from argwatch.server.process.app import build_gateway
from argwatch.v1 import gateway_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS = 4_000
REPEATS = 5
# Issue 31's goals, in microseconds a call, by the label of the row each is set on.
GOALS = {"membership only (1 bound argument)": 3.0, "membership + schema + cached look-up + 2 CEL rules": 10.0}


async def per_call(
    policy_path: str, strip: tuple[str, ...] = (), by_model: bool = False, signatures: bool = True
) -> tuple[float, int]:
    """Microseconds per validate() and the problems found, with `strip`ped features removed from the tool;
    `by_model`: the policy declares models, so each value check is counted again under the call's model;
    `signatures` False: no call is counted by its refusal signature (what PreviewChange reads), the baseline
    that count's cost is measured against."""
    policy = load_policy(policy_path)
    if by_model:
        import dataclasses

        from argwatch.server.policy.model import CohortConfig

        cohorts = CohortConfig(frozenset({"gpt-4.1-mini", "claude-sonnet-4-5"}), frozenset({"support-v13"}))
        policy = dataclasses.replace(policy, cohorts=cohorts)
    if strip:
        import dataclasses
        from types import MappingProxyType

        tool = dataclasses.replace(
            policy.tools["refund_order"],
            **{name: (None if name in ("schema", "schema_validator") else ()) for name in strip},
        )
        policy = dataclasses.replace(policy, tools=MappingProxyType({"refund_order": tool}))
    gateway = await build_gateway(bench_settings(policy_path), policy=policy)
    message = gateway_pb2.ValidateRequest.FromString(payload())
    message.model, message.prompt_version = "gpt-4.1-mini", "support-v13"
    call = wire.call_from_request(message)
    if not signatures:
        gateway.validator._signatures = None  # as offline replay builds it: the one thing left out
    verdict = await gateway.validator.validate(call)  # warms the look-up cache
    gc.collect()
    micros = await best_micros(lambda: gateway.validator.validate(call), CALLS, REPEATS)
    await gateway.stop(0)
    return micros, len(verdict.problems)


async def main() -> None:
    records, port = await start_records()
    gate = write_policy(port)
    try:
        rows = [
            ("membership only (1 bound argument)", await per_call(os.path.join(HERE, "policy.yaml"))),
            (
                "membership only, no call counted for previews",
                await per_call(os.path.join(HERE, "policy.yaml"), signatures=False),
            ),
            (
                "membership, split by model (the policy declares models)",
                await per_call(os.path.join(HERE, "policy.yaml"), by_model=True),
            ),
            ("membership + schema", await per_call(gate, strip=("records", "rules"))),
            ("membership + schema + cached look-up + 2 CEL rules", await per_call(gate)),
            (
                "membership + cached look-up + 2 CEL rules (no schema)",
                await per_call(gate, strip=("schema", "schema_validator")),
            ),
        ]
    finally:
        await records.stop(0)
    print(f"{'the gate, per call (in-process, no RPC; best of 5 x 4,000)':<58} {'us':>7}  problems")
    for label, (micros, problems) in rows:
        print(f"{label:<58} {micros:>7.1f}  {problems}")
    assert all(problems == 0 for _, (_, problems) in rows), "the benchmark call must pass every check"
    # A row renamed would drop its figure from `make bench`'s table without a word: fail here instead.
    assert GOALS.keys() <= {label for label, _ in rows}, "a row with a goal was renamed: update GOALS"
    for label, (micros, _) in rows:
        if label in GOALS:
            report(
                f"the gate per call, in-process: {label}",
                micros,
                "µs",
                f"<= {GOALS[label]:g} µs",
                micros <= GOALS[label],
            )


if __name__ == "__main__":
    asyncio.run(main())
