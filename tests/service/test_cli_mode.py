"""`argwatch mode list|set|clear` run as a user runs it, against a real gateway that requires tokens: a change
is shown, asked for (or --yes), made and audited; each outcome has its own exit code (0 applied, 1 refused,
2 usage or not confirmed, 3 unreachable or not let in), never a traceback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import RunningGateway, build_gateway
from tests.conftest import SourceServer, loopback_settings, make_policy
from tests.service.helpers import eventually, gateway_stub, request

ARGWATCH = os.path.join(os.path.dirname(sys.executable), "argwatch")
ADMIN = "admin-token-0123456789"
READER = "read-token-0123456789a"


async def argwatch(*args: str, stdin: int | None = None, answer: str = "") -> tuple[int, str, str]:
    """Runs the command to the end while the gateway serves on this loop, its stdin no terminal unless one is
    given (then `answer` is typed on it): its exit code, stdout and stderr."""
    environment = {k: v for k, v in os.environ.items() if k != "ARGWATCH_ADMIN_TOKEN"}
    process = await asyncio.create_subprocess_exec(
        ARGWATCH,
        *args,
        env=environment,
        stdin=asyncio.subprocess.DEVNULL if stdin is None else stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    assert "Traceback" not in err.decode()
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
async def gateway(tmp_path: Path, source: SourceServer) -> AsyncIterator[RunningGateway]:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        f"- {{name: ana@oncall, role: admin, token: {ADMIN}}}\n- {{name: grafana, role: read, token: {READER}}}\n"
    )
    tokens.chmod(0o600)  # as an operator keeps it; a readable one is refused
    (tmp_path / "admin-token").write_text(ADMIN + "\n")
    (tmp_path / "read-token").write_text(READER + "\n")
    policy = make_policy(str(tmp_path), source.target)
    settings = dataclasses.replace(loopback_settings(policy.path), admin_tokens=str(tokens))
    running = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    yield running
    await running.stop(0)


def admin(gateway: RunningGateway, folder: Path, token: str = "admin-token") -> list[str]:
    return ["--admin", gateway.admin_target, "--token-file", str(folder / token)]


@pytest.mark.e2e
async def test_set_list_and_clear_a_tool_s_override(gateway: RunningGateway, tmp_path: Path) -> None:
    """The plan names the mode now and after; the change is the token's name's, with its reason and expiry;
    the list shows where each mode comes from; clearing goes back to the policy's mode."""
    reach = admin(gateway, tmp_path)
    code, out, err = await argwatch(
        "mode", "set", "refund_order", "observe", "--reason", "INC-7: false rejects", "--expires", "30m", "--yes",
        *reach,
    )  # fmt: skip
    assert code == 0, err
    assert "refund_order: reject (policy) -> observe (override, expires in 30m)" in err
    assert out.startswith("applied: refund_order reject -> observe by ana@oncall, expires ")

    code, out, err = await argwatch("mode", "list", "--audit", "5", *reach)
    assert code == 0, err
    assert "global override: none" in out
    row = next(line for line in out.splitlines() if line.startswith("refund_order "))
    assert row.split()[:4] == ["refund_order", "observe", "override", "reject"]
    assert "ana@oncall" in row and "INC-7: false rejects" in row and re.search(r"\(in (29m\d+s|30m)\)", row)
    ticket = next(line for line in out.splitlines() if line.startswith("create_ticket "))
    assert ticket.split()[:4] == ["create_ticket", "observe", "policy", "observe"]
    assert "refund_order: reject -> observe  applied" in out  # the audit entry

    code, out, err = await argwatch("mode", "clear", "refund_order", "--reason", "INC-7 over", "--yes", *reach)
    assert code == 0, err
    assert "refund_order: observe (override, by ana@oncall (INC-7: false rejects), expires" in err
    assert "-> reject (policy)" in err
    assert out.startswith("cleared: refund_order observe -> reject by ana@oncall")

    code, out, err = await argwatch("mode", "clear", "refund_order", "--reason", "again", *reach)
    assert (code, out.strip()) == (0, "nothing to change")  # not asked: there is nothing to confirm
    assert "it has no override to clear" in err
    code, out, err = await argwatch("mode", "clear", "refund_order", "--reason", "again", "--json", *reach)
    assert (code, json.loads(out)) == (0, {"outcome": "nothing to change"})


@pytest.mark.e2e
async def test_the_global_override_names_the_tools_it_moves(gateway: RunningGateway, tmp_path: Path) -> None:
    reach = admin(gateway, tmp_path)
    code, out, err = await argwatch("mode", "set", "--global", "reject", "--reason", "INC-8", "--yes", *reach)
    assert code == 0, err
    assert "global override: none -> reject, no expiry" in err
    assert "create_ticket observe -> reject" in err and "refund_order" not in err.split("changes:")[1]
    assert out.startswith("applied: global override none -> reject by ana@oncall")

    code, out, err = await argwatch("mode", "list", "--json", *reach)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["status"]["global_mode"] == "MODE_REJECT"
    assert {tool["tool"]: tool["mode_source"] for tool in shown["status"]["tools"]} == {
        "refund_order": "global",
        "create_ticket": "global",
        "transfer_stock": "global",
    }
    assert shown["overrides"]["@global"]["actor"] == "ana@oncall"
    assert "windows" not in shown["status"]["tools"][0] or shown["status"]["tools"][0]["windows"] == []

    code, out, err = await argwatch("mode", "clear", "--global", "--reason", "INC-8 over", "--yes", "--json", *reach)
    assert code == 0, err
    change = json.loads(out)
    assert (change["tool"], change["old_mode"], change["new_mode"], change["outcome"]) == ("", "reject", "", "cleared")


@pytest.mark.e2e
async def test_without_a_terminal_or_yes_nothing_changes_and_exit_is_2(gateway: RunningGateway, tmp_path: Path) -> None:
    """A script that forgot --yes must not hang on a prompt nobody will answer, nor change anything."""
    reach = admin(gateway, tmp_path)
    code, out, err = await argwatch("mode", "set", "refund_order", "observe", "--reason", "INC-9", *reach)
    assert (code, out) == (2, "")
    assert "no terminal to ask on; give --yes" in err
    code, out, err = await argwatch("mode", "list", *reach)
    assert next(line for line in out.splitlines() if line.startswith("refund_order ")).split()[1] == "reject"


@pytest.mark.e2e
async def test_on_a_terminal_it_asks_and_only_yes_changes(gateway: RunningGateway, tmp_path: Path) -> None:
    reach = admin(gateway, tmp_path)
    for typed, expected in (("n\n", 2), ("y\n", 0)):
        controller, terminal = os.openpty()
        try:
            os.write(controller, typed.encode())
            code, out, err = await argwatch(
                "mode", "set", "refund_order", "observe", "--reason", "INC-10", *reach, stdin=terminal
            )
        finally:
            os.close(terminal)
            os.close(controller)
        assert code == expected, err
        assert "set the override? [y/N]" in err
    assert out.startswith("applied: refund_order reject -> observe")


@pytest.mark.e2e
async def test_a_refusal_is_exit_1_with_the_gateway_s_reason(gateway: RunningGateway, tmp_path: Path) -> None:
    reach = admin(gateway, tmp_path)
    code, out, err = await argwatch("mode", "set", "no_such_tool", "observe", "--reason", "INC-11", "--yes", *reach)
    assert (code, out) == (1, "")
    assert "no tool 'no_such_tool' (its tools: refund_order, create_ticket, transfer_stock)" in err
    code, out, err = await argwatch("mode", "set", "refund_order", "observe", "--reason", "x" * 1100, "--yes", *reach)
    assert (code, out) == (1, "")
    assert "refused: reason is 1100 characters; at most 1024 (INVALID_ARGUMENT)" in err


@pytest.mark.e2e
async def test_unreachable_or_not_let_in_is_exit_3(gateway: RunningGateway, tmp_path: Path) -> None:
    """Told apart from a refusal: the change was never weighed, and the message says what to fix."""
    code, _, err = await argwatch("mode", "list", "--admin", gateway.admin_target)
    assert code == 3 and "UNAUTHENTICATED" in err and "--token-file" in err
    code, _, err = await argwatch(
        "mode", "set", "refund_order", "observe", "--reason", "INC-12", "--yes", *admin(gateway, tmp_path, "read-token")
    )
    assert code == 3 and "PERMISSION_DENIED" in err and "admin role" in err
    await gateway.stop(0)
    code, _, err = await argwatch("mode", "list", *admin(gateway, tmp_path))
    assert code == 3 and "cannot reach the Admin API" in err


@pytest.mark.e2e
async def test_one_check_and_a_failure_override_from_the_command_line(gateway: RunningGateway, tmp_path: Path) -> None:
    """Issue 29's levers in a script: relax one check of a tool, make a source fail open, list both, clear them."""
    reach = admin(gateway, tmp_path)
    code, out, err = await argwatch(
        "mode", "set", "refund_order", "observe", "--check", "arg:reason_code", "--reason", "INC-9", "--yes", *reach
    )  # fmt: skip
    assert code == 0, err
    assert "refund_order arg:reason_code: observe; the tool's other checks keep its mode" in err
    code, out, err = await argwatch(
        "mode", "failure", "source:owners", "open", "--reason", "INC-9: owners down", "--expires", "30m", "--yes",
        *reach,
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith("applied: source:owners none -> open by ana@oncall"), out
    code, out, err = await argwatch("mode", "list", "--checks", *reach)
    assert code == 0, err
    assert "  refund_order arg:reason_code: observe (override by ana@oncall: INC-9)" in out
    assert "  source:owners: fails open (by ana@oncall: INC-9: owners down)" in out
    assert "  refund_order: arg:reason_code" in out
    code, out, err = await argwatch(
        "mode", "set", "refund_order", "observe", "--check", "record:nope", "--reason", "x", "--yes", *reach
    )  # fmt: skip
    assert code == 1 and "refund_order has no check 'record:nope'" in err
    code, _, err = await argwatch("mode", "failure", "source:owners", "ajar", "--reason", "x", "--yes", *reach)
    assert code == 2 and "FAILURE 'ajar'" in err
    code, out, err = await argwatch("mode", "failure", "source:owners", "clear", "--reason", "over", "--yes", *reach)
    assert code == 0, err
    code, out, err = await argwatch(
        "mode", "clear", "refund_order", "--check", "arg:reason_code", "--reason", "over", "--yes", *reach
    )
    assert code == 0, err
    code, out, _ = await argwatch("mode", "list", *reach)
    assert "checks overridden" not in out and "failure overrides" not in out


async def _refunds(gateway: RunningGateway, codes: list[str]) -> None:
    channel, stub = gateway_stub(gateway)
    async with channel:
        for index, code in enumerate(codes):
            await stub.Validate(request("refund_order", {"reason_code": code}, conversation=f"c{index}"), timeout=5)


@pytest.mark.e2e
async def test_preview_prints_the_gateway_s_lines_and_changes_nothing(gateway: RunningGateway, tmp_path: Path) -> None:
    """`mode preview` is the gateway's PreviewChange, word for word; a read-only token may ask; nothing is
    audited; what SetMode would refuse is exit 1, a target it cannot make out exit 2."""
    await _refunds(gateway, ["DAMAGED_ITEM"] * 4 + ["GOODWILL", "BECAUSE", "OTHER"])
    looking = admin(gateway, tmp_path, "read-token")
    said = "it would let through 3 of those 3 refused calls: 3 invented values"
    found: list[str] = []

    async def previewed() -> bool:  # the counts are this replica's, kept as calls are decided
        code, out, err = await argwatch("mode", "preview", "refund_order", "observe", *looking)
        assert code == 0, err
        found[:] = out.splitlines()
        return said in out

    await eventually(previewed)
    assert found[0] == "change: refund_order, the whole tool: reject -> observe"
    assert found[1].startswith("last 1 min") and "7 calls to refund_order on this replica, refused or not" in found[1]
    code, out, err = await argwatch("mode", "preview", "refund_order", "observe", "--json", *looking)
    shown = json.loads(out)
    assert code == 0 and shown["changes_anything"] is True
    assert shown["lines"][0] == found[0] and any(said in line for line in shown["lines"])
    assert [w["newly_allowed"] for w in shown["windows"]] == ["3", "3"]  # uint64 in JSON: a string

    code, out, err = await argwatch(
        "mode", "preview", "refund_order", "observe", "--check", "arg:reason_code", *looking
    )
    assert code == 0 and out.startswith("change: refund_order arg:reason_code: reject -> observe"), err
    code, out, err = await argwatch("mode", "preview", "source:owners", "--failure", "open", *looking)
    assert code == 0 and out.startswith("change: source:owners failure override: no override -> fails open"), err
    code, out, err = await argwatch("mode", "preview", "--global", "observe", *looking)
    assert code == 0 and out.startswith("change: global override (every tool): "), err

    code, out, err = await argwatch("mode", "preview", "refund_order", "observe", "--check", "record:nope", *looking)
    assert (code, out) == (1, "") and "refund_order has no check 'record:nope'" in err
    code, _, err = await argwatch("mode", "preview", "refund_order", "sideways", *looking)
    assert code == 2 and "MODE 'sideways'" in err
    code, _, err = await argwatch("mode", "preview", "refund_order", "observe", "--admin", gateway.admin_target)
    assert code == 3 and "UNAUTHENTICATED" in err
    assert gateway.modes.changes() == []  # asked six times, changed and audited nothing


@pytest.mark.e2e
async def test_set_with_yes_shows_the_preview_before_it_applies(gateway: RunningGateway, tmp_path: Path) -> None:
    """A script's log keeps what the change would have done, then what the gateway did."""
    await _refunds(gateway, ["GOODWILL", "BECAUSE"])
    reach = admin(gateway, tmp_path)
    code, out, err = await argwatch("mode", "set", "refund_order", "observe", "--reason", "INC-7", "--yes", *reach)
    assert code == 0, err
    plan, preview = err.index("refund_order: reject (policy) -> observe"), err.index("change: refund_order, the whole")
    assert plan < preview and "it would let through 2 of those 2 refused calls: 2 invented values" in err
    assert out.startswith("applied: refund_order reject -> observe")
    code, out, err = await argwatch("mode", "failure", "source:owners", "open", "--reason", "INC-9", *reach)
    assert (code, out) == (2, "") and "no terminal to ask on; give --yes" in err
    assert "change: source:owners failure override: no override -> fails open" in err  # shown, then refused
