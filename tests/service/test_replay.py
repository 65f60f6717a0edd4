"""Issue 21: `argwatch replay` judges recorded calls offline with the gateway's own verdict code.

A corpus of known composition comes back exactly; every provider's shape is read
(gzip too), malformed lines are counted and never fatal; the sets can come from
the owners or from `argwatch sets export`'s file with the same result; and the
comparison puts a live gateway's rates beside the corpus's.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

from argwatch.server.cli import main
from argwatch.server.policy.loader import load_policy
from argwatch.server.replay.corpus import ReadCounts, read_corpus
from argwatch.server.replay.report import as_json, build_report
from argwatch.server.replay.run import replay
from tests.conftest import GatewayFactory, SourceServer, make_policy, write_sets_file
from tests.docs.test_measuring_examples import block_after
from tests.service.helpers import gateway_stub, request

# refund_order's reason_code is bound to the owners' refunds.reason_codes (DAMAGED_ITEM, NOT_RECEIVED,
# WRONG_ITEM, LATE_DELIVERY; BROKEN retired): 20 legal, 5 invented, 3 in the wrong case, 2 retired.
MIX = ["DAMAGED_ITEM"] * 20 + ["GOODWILL"] * 5 + ["damaged_item"] * 3 + ["BROKEN"] * 2


def run_main(arguments: list[str]) -> int:
    """The `argwatch` command line, as the shell runs it (its own event loop: call it in a thread)."""
    return main(arguments)


def plain_lines(codes: list[str]) -> list[str]:
    return [json.dumps({"tool": "refund_order", "arguments": {"reason_code": code}}) for code in codes]


def write(path: Path, lines: list[str], *, compressed: bool = False) -> str:
    data = ("\n".join(lines) + "\n").encode()
    if compressed:
        data = gzip.compress(data)
    path.write_bytes(data)
    return str(path)


async def replayed(policy_path: str, files: list[str], sets_file: str = "") -> dict[str, Any]:
    policy = load_policy(policy_path)
    read = ReadCounts()
    result = await replay(policy, read_corpus(files, read), sets_file=sets_file)
    return as_json(build_report(policy, read, result))


def argument(report: dict[str, Any], tool: str, name: str) -> dict[str, Any]:
    (found,) = [t for t in report["tools"] if t["tool"] == tool]
    rows: list[dict[str, Any]] = [a for a in found["arguments"] if a["argument"] == name]
    (row,) = rows
    return row


async def test_a_corpus_of_known_composition_comes_back_exactly(tmp_path: Path, source: SourceServer) -> None:
    policy = make_policy(str(tmp_path), source.target)
    report = await replayed(policy.path, [write(tmp_path / "calls.jsonl", plain_lines(MIX))])
    (tool,) = report["tools"]
    assert (tool["calls"], tool["reject_would_refuse"], tool["refused"]) == (30, 10, 10)  # reject mode in this policy
    assert tool["with_invented_values"] == 5
    row = argument(report, "refund_order", "reason_code")
    assert (row["checks"], row["out_of_set"], row["out_of_set_normalised"]) == (30, 10, 7)
    assert row["shapes"] == {"invented": 5, "case": 3, "retired": 2}
    assert sum(row["shape_shares"].values()) == pytest.approx(1.0)
    assert row["problems"] == {"out_of_set": 10}
    assert row["top_offending_values"][0] == {"value": '"GOODWILL"', "count": 5, "shape": "invented"}
    assert report["sets"]["versions"]["refunds.reason_codes"] == 1


CHAT_CALL = {"id": "call_1", "type": "function", "function": {"name": "refund_order", "arguments": '{"reason_code": "GOODWILL"}'}}  # fmt: skip  # noqa: E501
CHAT_OK = {"id": "call_2", "type": "function", "function": {"name": "refund_order", "arguments": '{"reason_code": "WRONG_ITEM"}'}}  # fmt: skip  # noqa: E501
SHAPES = [
    # OpenAI Chat Completions: an API response with two tool calls, a transcript, one assistant message.
    {
        "object": "chat.completion",
        "model": "gpt-4.1-mini",
        "choices": [{"message": {"role": "assistant", "tool_calls": [CHAT_CALL, CHAT_OK]}}],
    },
    {
        "messages": [
            {"role": "user", "content": "refund"},
            {"role": "assistant", "tool_calls": [CHAT_CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "no"},
        ]
    },
    {"role": "assistant", "tool_calls": [CHAT_OK]},
    # OpenAI Responses: an API response, one function_call item, a transcript of items.
    {
        "object": "response",
        "model": "gpt-4.1",
        "output": [
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "refund_order",
                "arguments": '{"reason_code": "GOODWILL"}',
            }
        ],
    },
    {"type": "function_call", "call_id": "c2", "name": "refund_order", "arguments": '{"reason_code": "NOT_RECEIVED"}'},
    {
        "input": [
            {"role": "user", "content": "x"},
            {
                "type": "function_call",
                "call_id": "c3",
                "name": "refund_order",
                "arguments": '{"reason_code": "late delivery"}',
            },
        ]
    },
    # Anthropic Messages: a Message, and a transcript.
    {
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "text", "text": "ok"},
            {"type": "tool_use", "id": "t1", "name": "refund_order", "input": {"reason_code": "GOODWILL"}},
        ],
    },
    {
        "messages": [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t2", "name": "refund_order", "input": {"reason_code": "DAMAGED_ITEM"}}
                ],
            },
        ]
    },
    # MCP: a tools/call request, and another message of the session (no call).
    {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "refund_order", "arguments": {"reason_code": "GOODWILL"}},
    },
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
    # A user turn with no call in it.
    {"role": "user", "content": "hello"},
]
MALFORMED = ["{not json", '{"kind": "something else"}', json.dumps({"tool": "", "arguments": {}}), "[1, 2]"]


async def test_every_provider_s_shape_is_read_gzip_too_and_malformed_lines_are_counted(
    tmp_path: Path, source: SourceServer
) -> None:
    policy = make_policy(str(tmp_path), source.target)
    lines = [json.dumps(document) for document in SHAPES] + MALFORMED
    report = await replayed(policy.path, [write(tmp_path / "mixed.jsonl.gz", lines, compressed=True)])
    read = report["read"]
    assert read == {
        "files": 1,
        "lines": len(SHAPES) + len(MALFORMED),
        "lines_with_calls": 9,
        "lines_without_calls": 2,
        "duplicates": 2,
        "malformed": {
            "not JSON": 1,
            "JSON of no known transcript shape": 1,
            "a tool call without a tool name": 1,
            "not a JSON object": 1,
        },
    }
    # The chat transcript repeats call_1 and the lone assistant message repeats call_2: each is judged once.
    assert report["read"]["duplicates"] == 2
    row = argument(report, "refund_order", "reason_code")
    # 8 calls: GOODWILL x4 (the chat response, the Responses response, the Anthropic Message, MCP), WRONG_ITEM,
    # NOT_RECEIVED, "late delivery" (a separator slip) and DAMAGED_ITEM.
    assert report["calls"] == 8
    assert (row["checks"], row["out_of_set"], row["out_of_set_normalised"]) == (8, 4 + 1, 4)
    assert row["shapes"] == {"invented": 4, "separator": 1}


async def test_exported_sets_give_the_same_replay_as_the_owners_did(tmp_path: Path, source: SourceServer) -> None:
    policy = make_policy(str(tmp_path), source.target)
    corpus = write(tmp_path / "calls.jsonl", plain_lines(MIX))
    exported = str(tmp_path / "sets.json")
    # The command runs its own event loop: in a thread, beside the test's (which serves the owner).
    assert await asyncio.to_thread(run_main, ["sets", "export", "--policy", policy.path, "--out", exported]) == 0
    saved = json.loads(await asyncio.to_thread(Path(exported).read_text))
    assert saved["refunds.reason_codes"]["retired"] == ["BROKEN"]
    live = await replayed(policy.path, [corpus])
    # The owner moves on: a new code, and GOODWILL becomes legal. The exported file still judges as before.
    source.catalog.publish("refunds.reason_codes", ["GOODWILL", "DAMAGED_ITEM"], ["BROKEN"])
    again = await replayed(policy.path, [corpus], sets_file=exported)
    assert argument(again, "refund_order", "reason_code") == argument(live, "refund_order", "reason_code")
    assert again["sets"]["from"] == exported
    moved = await replayed(policy.path, [corpus])
    assert argument(moved, "refund_order", "reason_code")["out_of_set"] == 5  # case slips and a retired code


async def test_the_comparison_puts_the_live_rates_beside_the_corpus_s(
    tmp_path: Path, gateway_factory: GatewayFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    gateway = await gateway_factory(refund_mode="observe")
    channel, stub = gateway_stub(gateway)
    async with channel:  # production: 2 invented in 40 (5%)
        for code in ["DAMAGED_ITEM"] * 38 + ["GOODWILL"] * 2:
            await stub.Validate(request("refund_order", {"reason_code": code}), timeout=5)
    corpus = write(tmp_path / "calls.jsonl", plain_lines(MIX))  # the corpus: 10 in 30
    policy_path = os.path.join(str(tmp_path), "policy.yaml")  # the gateway's own
    arguments = ["replay", corpus, "--policy", policy_path, "--json", "--compare-to", gateway.admin_target]
    assert await asyncio.to_thread(run_main, arguments) == 0
    compared = json.loads(capsys.readouterr().out)["compared"]
    (row,) = [r for r in compared["rows"] if r["argument"] == "reason_code"]
    assert row["corpus"]["checks"] == 30 and row["live"]["checks"] == 40
    assert row["corpus"]["out_of_set_rate"] == pytest.approx(10 / 30, abs=1e-6)
    assert row["live"]["out_of_set_rate"] == 0.05
    assert row["difference"] == pytest.approx(10 / 30 - 0.05, abs=1e-6)
    arguments = ["replay", corpus, "--policy", policy_path, "--compare-to", gateway.admin_target]
    assert await asyncio.to_thread(run_main, arguments) == 0
    printed = capsys.readouterr().out.splitlines()
    start = printed.index(f"beside the live gateway at {gateway.admin_target} (its last 1h):")
    # docs/measuring.md shows this table: computed here, not typed in (only the address differs).
    assert printed[start + 1 : start + 3] == block_after("beside the live gateway at")[1:3]


async def test_an_export_with_an_owner_down_keeps_the_last_good_file_and_a_replay_says_what_did_not_load(
    tmp_path: Path, source: SourceServer
) -> None:
    policy = make_policy(str(tmp_path), source.target)
    exported = tmp_path / "sets.json"
    assert await asyncio.to_thread(run_main, ["sets", "export", "--policy", policy.path, "--out", str(exported)]) == 0
    good = await asyncio.to_thread(exported.read_bytes)
    await source.stop()  # the owner of refunds.reason_codes and identity.handles goes down
    export = ["sets", "export", "--policy", policy.path, "--out", str(exported), "--wait", "1s"]
    assert await asyncio.to_thread(run_main, export) == 1
    assert await asyncio.to_thread(exported.read_bytes) == good  # never replaced by a part of itself
    corpus = write(tmp_path / "calls.jsonl", plain_lines(MIX))
    replay_live = ["replay", corpus, "--policy", policy.path, "--wait", "1s", "--json"]
    assert await asyncio.to_thread(run_main, replay_live) == 1  # the report is printed, and the exit code says


async def test_where_the_policy_declares_models_the_corpus_is_split_by_model(tmp_path: Path) -> None:
    """The corpus's own question 3: did the new model make it worse? 10% against 30%, as recorded."""
    write_sets_file(str(tmp_path))
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(BY_MODEL_POLICY)
    lines = [
        json.dumps({"tool": "transfer_stock", "arguments": {"warehouse_code": code}, "model": model})
        for model, invented in (("gpt-4.1-mini", 10), ("claude-sonnet-4-5", 30), ("someone-else", 5))
        for code in ["XYZ-9"] * invented + ["AMS-1"] * (100 - invented)
    ]
    report = await replayed(str(policy_path), [write(tmp_path / "calls.jsonl", lines)])
    split = {
        row["model"]: (row["checks"], row["out_of_set"])
        for row in argument(report, "transfer_stock", "warehouse_code")["by_model"]
    }
    assert split == {"gpt-4.1-mini": (100, 10), "claude-sonnet-4-5": (100, 30), "_other": (100, 5)}


BY_MODEL_POLICY = """
sources:
  local: {file: sets.yaml}
value_sets:
  wms.warehouses: {source: local}
models:
  names: [gpt-4.1-mini, claude-sonnet-4-5]
tools:
  transfer_stock:
    arguments:
      warehouse_code: {value_set: wms.warehouses}
"""
