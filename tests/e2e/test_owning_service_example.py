"""examples/owning_service.py, the argwatch.sources example, as a process: a real gateway checks against its sets."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from argwatch.v1 import gateway_pb2
from tests.conftest import gateway_on
from tests.service.helpers import eventually, gateway_stub, request

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "owning_service.py"

POLICY = """
sources:
  refunds: {{grpc: {{target: "127.0.0.1:{port}", timeout: 2s}}}}
value_sets:
  refunds.reason_codes: {{source: refunds}}
tools:
  refund_order:
    mode: reject
    arguments:
      reason_code: {{value_set: refunds.reason_codes}}
"""


@pytest.mark.e2e
async def test_a_gateway_follows_the_example_owners_rename(tmp_path: Path) -> None:
    """The example serves its codes; a gateway allows a listed code, then refuses it once the owner renames it."""
    owner = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--listen",
        "127.0.0.1:0",
        "--rename-after",
        "1",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert owner.stdout is not None
        line = await asyncio.wait_for(owner.stdout.readline(), timeout=30)
        port = int(line.decode().rsplit(" ", 1)[1])
        gateway = await gateway_on(tmp_path, POLICY.format(port=port))
        channel, stub = gateway_stub(gateway)
        try:

            async def decision(code: str) -> int:
                reply = await stub.Validate(request("refund_order", {"reason_code": code}), timeout=5)
                return int(reply.decision)

            assert await decision("NOT_RECEIVED") == gateway_pb2.DECISION_ALLOW

            async def renamed() -> bool:
                return await decision("ITEM_NOT_RECEIVED") == gateway_pb2.DECISION_ALLOW

            await eventually(renamed, seconds=20)
            assert await decision("NOT_RECEIVED") == gateway_pb2.DECISION_REJECT
        finally:
            await channel.close()
            await gateway.stop(0)
    finally:
        owner.kill()
        await owner.wait()
