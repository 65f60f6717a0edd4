"""Every Admin answer stays under gRPC's 4 MiB, on the largest policy the docs allow, with traffic on every tool.

The finding: with 500 tools of 12 bound arguments and traffic on every tool,
GetStatus was 4.39 MiB, and `argwatch watch`, the TUI and every client on
gRPC's default limit failed with RESOURCE_EXHAUSTED. Every client here is on
that default limit: an answer over 4 MiB would fail the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import orjson

from argwatch.common.status_pages import join_pages
from argwatch.tui.admin_client import AdminClient
from argwatch.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc
from tests.conftest import gateway_on

# docs/operating.md: "Policies of up to 2,000 tools with 12 bound arguments each are tested".
TOOLS, ARGUMENTS = 2000, 12
LIMIT = 4 * 1024 * 1024


def _policy(prefix: str = "tool_", arguments: int = ARGUMENTS) -> str:
    lines = ["sources:", "  local: {file: sets.yaml}", "value_sets:", "  s: {source: local}", "tools:"]
    for tool in range(TOOLS):
        lines += [f"  {prefix}{tool:04d}_with_a_name_of_a_realistic_length:", "    arguments:"]
        lines += [f"      argument_{argument:02d}: {{value_set: s}}" for argument in range(arguments)]
    return "\n".join(lines) + "\n"


async def test_every_admin_answer_fits_in_a_message_on_the_largest_documented_policy(tmp_path: Path) -> None:
    (tmp_path / "sets.yaml").write_text(json.dumps({"s": {"version": 1, "members": ["a", "b"]}}))
    gateway = await gateway_on(tmp_path, _policy(), grace_seconds=0.0)
    try:
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            arguments = orjson.dumps({f"argument_{argument:02d}": "nope" for argument in range(ARGUMENTS)})
            for tool in gateway.policy.tools:  # traffic on every tool: every row has figures
                await stub.Validate(gateway_pb2.ValidateRequest(tool=tool, arguments_json=arguments), timeout=10)
        async with grpc.aio.insecure_channel(gateway.admin_target) as channel:
            admin = admin_pb2_grpc.AdminStub(channel)
            pages = [await admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=60)]
            while pages[-1].next_page_token:
                asked = admin_pb2.GetStatusRequest(page_token=pages[-1].next_page_token)
                pages.append(await admin.GetStatus(asked, timeout=10))
            assert len(pages) == pages[0].pages > 1
            assert all(page.ByteSize() < LIMIT for page in pages)
            whole = join_pages(pages)
            assert whole.ByteSize() > LIMIT  # more than one message could hold
            assert _named(whole) == (TOOLS, TOOLS * ARGUMENTS)
            assert whole.arguments[TOOLS * ARGUMENTS - 1].windows[0].value_checks == 1  # the last row's figures too

            changes = await admin.ListModeChanges(admin_pb2.ListModeChangesRequest(limit=1_000_000), timeout=10)
            assert len(changes.changes) <= 1000
            report = await admin.GetShapeReport(admin_pb2.GetShapeReportRequest(), timeout=60)
            assert len(report.rows) + report.rows_left_off == TOOLS * ARGUMENTS and report.ByteSize() < LIMIT

            # What the TUI and `argwatch watch` use: WatchStatus sends the pages one after another, joined here.
            client = AdminClient(gateway.admin_target, timeout=60)
            try:
                async for status in client.watch(5):
                    assert _named(status) == (TOOLS, TOOLS * ARGUMENTS)
                    break
            finally:
                await client.close()

            (tmp_path / "policy.yaml").write_text(_policy("renamed_", arguments=1))  # every name changes
            reload = await admin.ReloadPolicy(admin_pb2.ReloadPolicyRequest(reason="renamed"), timeout=120)
            assert len(reload.tools_added) == len(reload.tools_removed) == 1000
            assert reload.tools_left_off == 2 * (TOOLS - 1000)
    finally:
        await gateway.stop(0)


def _named(status: admin_pb2.GetStatusResponse) -> tuple[int, int]:
    """The policy's tools and bound arguments in a snapshot (beside the rows `_unknown` and `_call`)."""
    tools = sum(1 for tool in status.tools if tool.tool.startswith("tool_"))
    return tools, sum(1 for row in status.arguments if row.argument.startswith("argument_"))
