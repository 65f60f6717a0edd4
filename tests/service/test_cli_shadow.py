"""`argwatch shadow set|report|promote|clear` run as a user runs it, against a real gateway that requires tokens:
promote shows the report and the diff before it asks, and each outcome has its exit code."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from argwatch.server.process.app import RunningGateway
from tests.conftest import gateway_on
from tests.service.helpers import eventually, gateway_stub, request
from tests.service.test_cli_mode import ADMIN, READER, admin, argwatch
from tests.service.test_shadow_policy import LIVE, SETS, SHADOW


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    (tmp_path / "sets.yaml").write_text(SETS)
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        f"- {{name: ana@oncall, role: admin, token: {ADMIN}}}\n- {{name: grafana, role: read, token: {READER}}}\n"
    )
    tokens.chmod(0o600)
    (tmp_path / "admin-token").write_text(ADMIN + "\n")
    (tmp_path / "read-token").write_text(READER + "\n")
    running = await gateway_on(tmp_path, LIVE, admin_tokens=str(tokens))
    yield running
    await running.stop(0)


@pytest.mark.e2e
async def test_set_report_promote_and_clear(gateway: RunningGateway, tmp_path: Path) -> None:
    reach = admin(gateway, tmp_path)
    (tmp_path / "next.yaml").write_text(SHADOW)
    (tmp_path / "broken.yaml").write_text("tools: [1]\n")
    code, out, err = await argwatch("shadow", "set", str(tmp_path / "broken.yaml"), "--reason", "CHG-7", *reach)
    assert code == 1 and "tools" in err and "broken.yaml" in err
    code, out, err = await argwatch(
        "shadow", "set", str(tmp_path / "next.yaml"), "--reason", "CHG-7", *admin(gateway, tmp_path, "read-token")
    )
    assert code == 3, err
    code, out, err = await argwatch("shadow", "set", str(tmp_path / "next.yaml"), "--reason", "CHG-7", *reach)
    assert code == 0, err
    assert "judging every call, deciding none" in out
    channel, stub = gateway_stub(gateway)
    async with channel:
        await stub.Validate(request("add_note", {"country": "XX"}, call_id="n1"), timeout=5)
    await eventually(lambda: gateway.shadow is not None and gateway.shadow.runner.calls_judged() == 1)
    code, out, err = await argwatch("shadow", "report", *admin(gateway, tmp_path, "read-token"))
    assert code == 0, err
    assert "add_note  would_refuse  1" in out and "n1: live allow" in out
    code, out, err = await argwatch("shadow", "report", "--json", *reach)
    assert json.loads(out)["differences"][0]["kind"] == "would_refuse"
    # No terminal and no --yes: the diff is shown, nothing is promoted.
    code, out, err = await argwatch("shadow", "promote", "--reason", "CHG-7 go", *reach)
    assert code == 2 and "tools changed: " in err and "not confirmed" in err
    assert gateway.shadow is not None and gateway.shadow.runner.judge is not None
    code, out, err = await argwatch("shadow", "promote", "--reason", "CHG-7 go", "--yes", *reach)
    assert code == 0, err
    assert "tools changed: " in err and out.startswith("promoted: serving")
    code, out, err = await argwatch("shadow", "clear", "--reason", "none left", *reach)
    assert (code, out.strip()) == (0, "no shadow was set")
    code, out, err = await argwatch("shadow", "promote", "--reason", "again", "--yes", *reach)
    assert code == 1 and "no shadow policy is set" in err
