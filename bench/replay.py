"""`argwatch replay`'s rate: recorded calls judged per second, beside the checker's own rate and the Validate RPC's.

Three figures from one run on the bench policy (its set read from a file):
- replay: a JSON-lines corpus of 20,000 Chat Completions responses (a 5% mix of
  invented codes), read, parsed and judged end to end (`argwatch replay` without
  the printing);
- the checker: Validator.validate on the same calls, already decoded, in a loop
  (what replay can at best approach);
- the RPC: the same calls as unary Validate on loopback against a gateway in
  this process (what a replay through a running gateway would get).
Replay should sit near the checker and far above the RPC.

    python bench/replay.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_server import bench_settings

from argwatch.server.policy.loader import load_policy
from argwatch.server.process.app import build_gateway
from argwatch.server.replay.corpus import ReadCounts, read_corpus
from argwatch.server.replay.run import replay
from argwatch.server.verdict.tool_call import ToolCall, decode_json_arguments
from argwatch.v1 import gateway_pb2, gateway_pb2_grpc

HERE = os.path.dirname(os.path.abspath(__file__))
POLICY = os.path.join(HERE, "policy.yaml")
CALLS = 20_000
RPC_CALLS = 2_000  # unary RPCs are ~100 times slower: fewer of them give the same precision


def corpus_line(index: int) -> str:
    code = "ITEM_DEFECTIVE" if index % 20 == 0 else "DAMAGED_ITEM"
    arguments = {"order_id": f"ord_{index:010d}", "reason_code": code, "amount_cents": 1200}
    call = {
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": "refund_order", "arguments": json.dumps(arguments)},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return json.dumps(
        {"object": "chat.completion", "model": "gpt-4.1-mini", "choices": [{"index": 0, "message": message}]}
    )


def write_corpus(path: str) -> None:
    with open(path, "w") as handle:
        handle.write("\n".join(corpus_line(index) for index in range(CALLS)) + "\n")


async def main() -> None:
    policy = load_policy(POLICY)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "corpus.jsonl")
        write_corpus(path)

        # 1. replay, end to end (reading and parsing included)
        read = ReadCounts()
        started = time.perf_counter()
        result = await replay(policy, read_corpus([path], read))
        replay_seconds = time.perf_counter() - started
        assert result.calls == CALLS

        # 2. the checker alone, on the same calls decoded once
        gateway = await build_gateway(bench_settings(POLICY), policy=policy)
        calls = []
        for index, recorded in enumerate(read_corpus([path], ReadCounts())):
            arguments, error = decode_json_arguments(recorded.arguments_json)
            calls.append(ToolCall(recorded.tool, arguments, f"c{index}", "", "", "", error, recorded.arguments_json))
        started = time.perf_counter()
        for call in calls:
            await gateway.validator.validate(call)
        checker_seconds = time.perf_counter() - started

        # 3. the RPC: unary Validate on loopback
        async with grpc.aio.insecure_channel(gateway.target) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            requests = [
                gateway_pb2.ValidateRequest(tool=call.tool, arguments_json=call.raw_arguments)
                for call in calls[:RPC_CALLS]
            ]
            await stub.Validate(requests[0], timeout=5)
            started = time.perf_counter()
            for message in requests:
                await stub.Validate(message, timeout=5)
            rpc_seconds = time.perf_counter() - started
        await gateway.stop(0)

    replay_rate, checker_rate, rpc_rate = CALLS / replay_seconds, CALLS / checker_seconds, RPC_CALLS / rpc_seconds
    print(f"replay ({CALLS:,} Chat Completions lines, read and judged): {replay_rate:>9,.0f} calls/s")
    print(f"the checker alone (Validator.validate, decoded calls):    {checker_rate:>9,.0f} calls/s")
    print(f"unary Validate over loopback ({RPC_CALLS:,} calls):            {rpc_rate:>9,.0f} calls/s")
    print(f"replay / checker: {replay_rate / checker_rate:.2f}   replay / RPC: {replay_rate / rpc_rate:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
