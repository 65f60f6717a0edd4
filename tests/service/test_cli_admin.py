"""The Admin API commands (watch, report) against a gateway that requires tokens: the same token and TLS
options as the TUI, a refusal is exit 1 with the reason on stderr (never a traceback, never exit 0)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from argwatch.server.process.app import RunningGateway, build_gateway
from tests.conftest import SourceServer, loopback_settings, make_policy

ARGWATCH = os.path.join(os.path.dirname(sys.executable), "argwatch")
READER = "read-token-0123456789a"


async def argwatch(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Runs the command to the end while the gateway serves on this loop: its exit code, stdout and stderr."""
    environment = {k: v for k, v in os.environ.items() if k != "ARGWATCH_ADMIN_TOKEN"} | (env or {})
    process = await asyncio.create_subprocess_exec(
        ARGWATCH, *args, env=environment, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
async def secured(tmp_path: Path, source: SourceServer) -> AsyncIterator[RunningGateway]:
    (tmp_path / "tokens.yaml").write_text(f"- {{name: grafana, role: read, token: {READER}}}\n")
    (tmp_path / "tokens.yaml").chmod(0o600)  # as an operator keeps it; a readable one is refused
    policy = make_policy(str(tmp_path), source.target)
    settings = dataclasses.replace(loopback_settings(policy.path), admin_tokens=str(tmp_path / "tokens.yaml"))
    gateway = await build_gateway(settings, policy=policy, registry=CollectorRegistry())
    yield gateway
    await gateway.stop(0)


@pytest.mark.e2e
async def test_watch_without_a_token_fails_and_with_one_prints_the_status(
    secured: RunningGateway, tmp_path: Path
) -> None:
    code, out, err = await argwatch("watch", "--admin", secured.admin_target, "--count", "1")
    assert (code, out) == (1, "")
    assert "UNAUTHENTICATED" in err and "Traceback" not in err
    (tmp_path / "token").write_text(READER + "\n")
    code, out, err = await argwatch(
        "watch", "--admin", secured.admin_target, "--count", "1", "--token-file", str(tmp_path / "token")
    )
    assert code == 0, err
    assert "refund_order" in out


@pytest.mark.e2e
async def test_report_without_a_token_fails_cleanly_and_with_one_reports(secured: RunningGateway) -> None:
    code, out, err = await argwatch("report", "--admin", secured.admin_target, "--window", "1h")
    assert code == 1 and "UNAUTHENTICATED" in err and "Traceback" not in err
    code, out, err = await argwatch(
        "report", "--admin", secured.admin_target, "--window", "1h", env={"ARGWATCH_ADMIN_TOKEN": READER}
    )
    assert code == 0, err
    assert out.startswith("mismatch shapes")


@pytest.mark.e2e
async def test_health_says_serving_for_a_running_gateway(secured: RunningGateway) -> None:
    code, out, err = await argwatch("health", "--gateway", secured.target)
    assert code == 0, err
    assert out.strip() == f"{secured.target}: SERVING"


@pytest.mark.e2e
async def test_the_tui_with_stdout_piped_prints_the_one_line_status_instead(
    secured: RunningGateway, tmp_path: Path
) -> None:
    """Before, `argwatch tui | tee log` drew the full-screen app's escape codes into the pipe."""
    (tmp_path / "token").write_text(READER + "\n")
    process = await asyncio.create_subprocess_exec(
        ARGWATCH, "tui", "--admin", secured.admin_target, "--token-file", str(tmp_path / "token"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None and process.stderr is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=30)).decode()
        said = (await asyncio.wait_for(process.stderr.readline(), timeout=5)).decode()
    finally:
        process.terminate()
        await process.wait()
    assert "stdout is not a terminal" in said
    assert "refund_order" in line and "\x1b" not in line  # a line of text, no terminal escape codes
