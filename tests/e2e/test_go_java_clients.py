"""The Go and Java clients (examples/go, examples/java: protoc's stubs on Debian's grpc-go and grpc-java) against a
real gateway, and the docs showing the commands that build them."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from argwatch.server.telemetry.samples import SAMPLES_LOGGER
from tests.conftest import REASON_CODES, GatewayFactory
from tests.service.helpers import run_program

ROOT = Path(__file__).resolve().parents[2]
SERVICE_CONFIG = "proto/argwatch/v1/service_config.json"


@dataclass(frozen=True)
class Client:
    language: str  # also the start of the call ids and conversation id that the program sends
    built: str  # what `make test` builds before pytest runs (examples/<language>/build.sh), from the root
    runner: tuple[str, ...]  # what runs it, before its path

    def command(self) -> list[str]:
        if self.runner:
            found = shutil.which(self.runner[0])
            assert found is not None, f"{self.runner[0]} is missing: `make test` installs it with apt"
        program = ROOT / self.built
        assert program.exists(), (
            f"{program} is not built: `make test` builds it first ({self.script}, through make {self.language}-client)"
        )
        return [*self.runner, str(program)]

    @property
    def script(self) -> Path:
        return ROOT / "examples" / self.language / "build.sh"


GO = Client("go", "examples/go/build/check", ())
JAVA = Client("java", "examples/java/build/check.jar", ("java", "-jar"))
CLIENTS = pytest.mark.parametrize("client", [GO, JAVA], ids=lambda client: client.language)


async def run_client(client: Client, target: str) -> dict[str, object]:
    out = await run_program(*client.command(), target, str(ROOT / SERVICE_CONFIG), seconds=30)
    steps = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {step["step"]: step["value"] for step in steps}


@pytest.mark.e2e
@CLIENTS
async def test_the_client_gets_the_verdicts_and_the_repair(
    client: Client, gateway_factory: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SAMPLES_LOGGER)
    gateway = await gateway_factory(refund_mode="reject")
    seen = await run_client(client, gateway.target)
    lang = client.language

    clean = seen["validate_clean"]
    assert isinstance(clean, dict)
    assert (clean["decision"], clean["problems"]) == ("DECISION_ALLOW", 0)
    assert clean["call_id"]  # minted by the gateway when the caller gives none

    assert seen["validate_invented"] == {
        "decision": "DECISION_REJECT",
        "call_id": f"{lang}-invented-1",
        "problems": [{"code": "PROBLEM_CODE_OUT_OF_SET", "argument": "reason_code", "shape": "SHAPE_INVENTED"}],
    }

    advice = seen["repair"]
    assert isinstance(advice, dict)
    assert advice["executed"] is False
    assert "ITEM_DEFECTIVE" in advice["message"]
    assert sorted(advice["legal"][0]) == sorted(REASON_CODES)

    # Keyed by the call_id of each response, as the program received them, in whatever order.
    assert seen["validate_stream"] == {
        f"{lang}-s1": {"decision": "DECISION_ALLOW", "problems": []},
        f"{lang}-s2": {"decision": "DECISION_REJECT", "problems": ["PROBLEM_CODE_OUT_OF_SET"]},  # a slip, refused
        # A tool the policy does not know is judged in default_mode (observe here): reported, let through.
        f"{lang}-s3": {"decision": "DECISION_ALLOW", "problems": ["PROBLEM_CODE_UNKNOWN_TOOL"]},
    }

    # The fields the harness sets reached the gateway: the sampled log (every offending value here) keeps
    # them with the invented value.
    samples = [json.loads(record.getMessage()) for record in caplog.records if record.name == SAMPLES_LOGGER]
    invented = [sample for sample in samples if sample["call_id"] == f"{lang}-invented-1"]
    assert len(invented) == 1, samples
    assert (invented[0]["conversation_id"], invented[0]["model"]) == (f"{lang}-conversation", "gpt-4.1-mini")


@pytest.mark.e2e
@CLIENTS
def test_the_docs_show_what_the_build_and_the_test_run(client: Client) -> None:
    text = (ROOT / "docs" / "calling.md").read_text()
    section = text[text.index("## From Go or Java") :]
    section = section[: section.index("\n## ")]
    # The script's commands, without its comments and its own `set` and `cd`, which the docs replace
    # with a `cd` from the root.
    skipped = ("#", "set -eu", 'cd "$(dirname "$0")"')
    commands = [line for line in client.script.read_text().splitlines() if not line.lstrip().startswith(skipped)]
    shown = "\n".join([f"cd examples/{client.language}", *commands])
    assert f"```sh\n{shown}\n```" in section, f"docs/calling.md no longer shows what {client.script} runs"
    run = " ".join([*client.runner, client.built, "127.0.0.1:50051", SERVICE_CONFIG])
    assert f"```sh\n{run}\n```" in section
