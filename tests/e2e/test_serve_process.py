"""End to end: `argwatch serve` as a process on the example policy, called as an agent would, stopped with SIGTERM."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import orjson
import pytest

from argwatch.v1 import gateway_pb2 as pb
from argwatch.v1 import gateway_pb2_grpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
ARGWATCH = os.path.join(os.path.dirname(sys.executable), "argwatch")

pytestmark = pytest.mark.e2e


def read_until(stream, pattern: str, seconds: float = 20.0) -> re.Match[str]:
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if match := re.search(pattern, line):
            return match
    raise AssertionError(f"{pattern!r} not seen; output:\n{''.join(seen)}")


@pytest.fixture
def demo_source() -> Iterator[str]:
    """The demo owning service as a process, on a free loopback port."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with subprocess.Popen(
        [sys.executable, os.path.join(EXAMPLES, "demo_source.py"), "--listen", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            read_until(process.stderr, "demo owning service on")
            yield f"127.0.0.1:{port}"
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)


@pytest.fixture
def example_policy(tmp_path, demo_source: str) -> str:
    """The bundled example policy, pointed at this test's demo source, sampling every offending value."""
    with open(os.path.join(EXAMPLES, "policy.yaml")) as handle:
        text = handle.read()
    assert "127.0.0.1:50061" in text and "rate: 0.02" in text
    text = text.replace("127.0.0.1:50061", demo_source).replace("rate: 0.02", "rate: 1.0")
    (tmp_path / "policy.yaml").write_text(text)
    shutil.copy(os.path.join(EXAMPLES, "value_sets.yaml"), tmp_path / "value_sets.yaml")
    return str(tmp_path / "policy.yaml")


def test_serve_answers_agents_and_drains_on_sigterm(example_policy: str, tmp_path) -> None:
    samples = tmp_path / "samples.jsonl"
    with subprocess.Popen(
        [
            ARGWATCH,
            "serve",
            "--policy",
            example_policy,
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
            "--sample-log",
            str(samples),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ARGWATCH_GLOBAL_MODE": "reject"},
    ) as gateway:
        drive_and_stop(gateway, samples)


def drive_and_stop(gateway: subprocess.Popen[str], samples) -> None:
    """Calls the gateway as an agent would, reads its metrics, then stops it with SIGTERM."""
    try:
        match = read_until(gateway.stderr, r"on 127\.0\.0\.1:(\d+), admin on .*, metrics on :(\d+)")
        target, metrics_port = f"127.0.0.1:{match.group(1)}", match.group(2)
        with grpc.insecure_channel(target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            # The order is looked up (its ownership is checked): a call without one is refused since the
            # record check stopped skipping a missing id in silence.
            legal = {"reason_code": "DAMAGED_ITEM", "order_id": "ord_000001", "amount_cents": 100}
            ok = stub.Validate(
                pb.ValidateRequest(
                    tool="refund_order",
                    arguments_json=orjson.dumps(legal),
                    session=pb.Session(customer_id="cus_000"),
                ),
                timeout=5,
            )
            bad = stub.Validate(
                pb.ValidateRequest(tool="transfer_stock", arguments_json=orjson.dumps({"warehouse_code": "AMS-9"})),
                timeout=5,
            )
            repair = stub.Repair(pb.RepairRequest(call_id=bad.call_id), timeout=5)
        assert ok.decision == pb.DECISION_ALLOW and not ok.problems
        assert bad.decision == pb.DECISION_REJECT
        assert '"AMS-1", "AMS-2", "BER-1", "LHR-3", "MAD-1", "WAW-2"' in repair.message
        import urllib.request

        body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
        assert 'argwatch_decisions_total{decision="reject",mode="reject",tool="transfer_stock"} 1.0' in body
        assert "AMS-9" not in body  # the model's value never reaches a label
    finally:
        gateway.send_signal(signal.SIGTERM)
        assert gateway.wait(timeout=15) == 0
    (line,) = samples.read_text().splitlines()  # the sink was flushed by the graceful stop
    assert orjson.loads(line)["value"] == '"AMS-9"'


def test_serve_refuses_an_invalid_policy_with_every_error(tmp_path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("tools:\n  t:\n    arguments:\n      a: {value_set: nowhere}\n    mood: happy\n")
    result = subprocess.run([ARGWATCH, "serve", "--policy", str(policy)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert f"{policy}:5:5: tools.t.mood: unknown key; did you mean 'mode'?" in result.stderr
    assert f"{policy}:4:11: tools.t.arguments.a.value_set: undefined value set 'nowhere'" in result.stderr
    assert "refusing to start" in result.stderr


def test_policy_check_prints_ok_for_the_example_and_errors_otherwise(tmp_path) -> None:
    ok = subprocess.run(
        [ARGWATCH, "policy", "check", os.path.join(EXAMPLES, "policy.yaml")], capture_output=True, text=True, timeout=30
    )
    assert ok.returncode == 0 and "ok: 5 tools, 7 bound arguments, 7 value sets" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("value_sets: {s: {source: x, ttl: forever}}\ntools: {}\n")
    result = subprocess.run([ARGWATCH, "policy", "check", str(bad)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "value_sets.s.ttl: expected a duration" in result.stderr
    assert "3 error(s)" in result.stderr


def test_serve_says_which_address_it_cannot_listen_on(tmp_path) -> None:
    import socket

    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "sources: {s: {file: sets.yaml}}\nvalue_sets: {a.b: {source: s}}\n"
        "tools: {t: {arguments: {x: {value_set: a.b}}}}\n"
    )
    (tmp_path / "sets.yaml").write_text("a.b: {members: [X]}\n")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = subprocess.run(
            [
                ARGWATCH,
                "serve",
                "--policy",
                str(policy),
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--metrics-listen",
                f"127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 2
    assert "cannot start" in result.stderr and str(port) in result.stderr


def test_the_demo_traffic_runs_against_the_demo_policy_with_repeats_caught(example_policy: str) -> None:
    """`make run`'s traffic, bounded: refunds report outcomes, a few time out and are repeated, and the
    gateway refuses those repeats and counts them."""
    with subprocess.Popen(
        [ARGWATCH, "serve", "--policy", example_policy, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
         "--metrics-listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    ) as gateway:  # fmt: skip
        try:
            match = read_until(gateway.stderr, r"on 127\.0\.0\.1:(\d+), admin on .*, metrics on :(\d+)")
            traffic = subprocess.run(
                [sys.executable, os.path.join(EXAMPLES, "traffic.py"), "--target", f"127.0.0.1:{match.group(1)}",
                 "--rate", "100", "--duration", "6", "--seed", "3"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert traffic.returncode == 0, traffic.stderr
            counts = dict(part.split("=") for part in traffic.stderr.split("traffic:")[1].split())
            import urllib.request

            body = urllib.request.urlopen(f"http://127.0.0.1:{match.group(2)}/metrics", timeout=5).read().decode()
        finally:
            gateway.send_signal(signal.SIGTERM)
            assert gateway.wait(timeout=15) == 0
    assert counts["errors"] == "0" and int(counts["repeats_refused"]) >= 1, counts
    repeats = re.search(r'^tool_call_repeat_total\{tool="refund_order"\} (\S+)$', body, re.MULTILINE)
    assert repeats is not None and float(repeats.group(1)) == int(counts["repeats_refused"])
    assert re.search(r'^argwatch_outcome_reports_total\{outcome="succeeded",tool="refund_order"\} [1-9]', body, re.M)
    # The nested tool: each line item's SKU checked, counted under the binding's pattern, never an index.
    assert re.search(r'^tool_argument_value_check_total\{argument="items\[\*\]\.sku",', body, re.M)
    assert not re.search(r'argument="items\[[0-9]', body)


def test_sighup_reloads_the_policy_and_a_broken_one_keeps_the_last_good(example_policy: str) -> None:
    """Before, SIGHUP killed the process (exit 129) with no drain and no log line."""
    from argwatch.v1 import admin_pb2, admin_pb2_grpc

    with subprocess.Popen(
        [ARGWATCH, "serve", "--policy", example_policy, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
         "--metrics-listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    ) as gateway:  # fmt: skip
        try:
            match = read_until(gateway.stderr, r"serving policy (\w+) .* on 127\.0\.0\.1:(\d+), admin on ([\d.:]+)")
            first, target, admin_target = match.group(1), f"127.0.0.1:{match.group(2)}", match.group(3)
            policy = Path(example_policy)
            observed, rejected = "  transfer_stock:\n    mode: observe", "  transfer_stock:\n    mode: reject"
            assert observed in policy.read_text()
            policy.write_text(policy.read_text().replace(observed, rejected))
            gateway.send_signal(signal.SIGHUP)
            second = read_until(gateway.stderr, rf"policy reloaded: {first} -> (\w+)").group(1)
            with grpc.insecure_channel(target) as channel:
                bad = gateway_pb2_grpc.GatewayStub(channel).Validate(
                    pb.ValidateRequest(tool="transfer_stock", arguments_json=b'{"warehouse_code": "AMS-9"}'), timeout=5
                )
            assert (bad.decision, bad.policy_version) == (pb.DECISION_REJECT, second)  # the new mode, at once
            policy.write_text("tools: [\n")
            gateway.send_signal(signal.SIGHUP)
            read_until(gateway.stderr, rf"policy reload refused; still serving {second}")
            with grpc.insecure_channel(admin_target) as channel:
                status = admin_pb2_grpc.AdminStub(channel).GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
            assert status.policy_version == second and "not valid YAML" in status.policy_reload_error
            assert gateway.poll() is None  # still serving
        finally:
            gateway.send_signal(signal.SIGTERM)
            assert gateway.wait(timeout=15) == 0
