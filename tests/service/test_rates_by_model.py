"""Issue 21: out-of-set rates per model and prompt version, from traffic of known composition.

Two declared models at known rates, an undeclared one, and calls naming none: the
gateway's counters and its Admin API give each its own rate, and what the policy
does not declare stays under "_other" and "_none", however many names callers invent.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from argwatch.server.process.app import RunningGateway
from argwatch.v1 import admin_pb2
from argwatch.v1 import gateway_pb2 as pb
from tests.conftest import WAREHOUSES, gateway_on, write_sets_file
from tests.service.helpers import admin_status, admin_stub, gateway_stub, series_count, value

POLICY = """
sources:
  local: {file: sets.yaml}
value_sets:
  wms.warehouses: {source: local}
{models}tools:
  transfer_stock:
    mode: observe
    arguments:
      warehouse_code: {value_set: wms.warehouses}
"""
MODELS = """models:
  names: [gpt-4.1-mini, claude-sonnet-4-5]
  prompt_versions: [support-v12, support-v13]
"""
POLICY = POLICY.replace("{models}", MODELS)
GOOD, INVENTED = WAREHOUSES[0], "XYZ-9"
# (model, prompt version, calls, of which invented): 10% and 30% for the declared two.
TRAFFIC = [
    ("gpt-4.1-mini", "support-v13", 100, 10),
    ("claude-sonnet-4-5", "support-v13", 100, 30),
    ("claude-sonnet-4-5", "support-v12", 40, 2),
    ("llama-3-70b-instruct", "support-v13", 50, 25),  # not declared: "_other"
    ("", "", 20, 0),  # named none: "_none"
]


async def send(gateway: RunningGateway, calls: list[pb.ValidateRequest]) -> None:
    channel, stub = gateway_stub(gateway)
    async with channel:
        stream = stub.ValidateStream(timeout=60)
        for call in calls:
            await stream.write(call)
        await stream.done_writing()
        answered = [response async for response in stream]
    assert len(answered) == len(calls)


def calls_of(model: str, version: str, count: int, invented: int) -> list[pb.ValidateRequest]:
    return [
        pb.ValidateRequest(
            tool="transfer_stock",
            arguments_json=b'{"warehouse_code": "%s"}' % (INVENTED if index < invented else GOOD).encode(),
            model=model,
            prompt_version=version,
        )
        for index in range(count)
    ]


async def test_each_declared_model_gets_its_own_rate_and_the_rest_is_bounded(tmp_path: Path) -> None:
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(tmp_path, POLICY)
    try:
        for model, version, count, invented in TRAFFIC:
            await send(gateway, calls_of(model, version, count, invented))

        def checks(model: str, version: str, in_set: str) -> float:
            return value(
                gateway.registry,
                "tool_argument_value_check_by_model_total",
                tool="transfer_stock",
                argument="warehouse_code",
                model=model,
                prompt_version=version,
                in_set=in_set,
                in_set_normalised=in_set,
            )

        # What Prometheus computes from the counters: the out-of-set share per model, as sent.
        expected = {
            ("gpt-4.1-mini", "support-v13"): (90, 10),
            ("claude-sonnet-4-5", "support-v13"): (70, 30),
            ("claude-sonnet-4-5", "support-v12"): (38, 2),
            ("_other", "support-v13"): (25, 25),
            ("_none", "_none"): (20, 0),
        }
        for (model, version), (clean, out) in expected.items():
            assert (checks(model, version, "true"), checks(model, version, "false")) == (clean, out), model

        # The Admin API's windows side by side, from the same counts.
        status = await admin_status(gateway)
        (row,) = [a for a in status.arguments if (a.tool, a.argument) == ("transfer_stock", "warehouse_code")]
        minute = {(c.model, c.prompt_version): _window(c, 60) for c in await cohorts(gateway)}
        assert {key: (w.value_checks, w.out_of_set) for key, w in minute.items()} == {
            key: (clean + out, out) for key, (clean, out) in expected.items()
        }
        assert minute["gpt-4.1-mini", "support-v13"].out_of_set_rate == 0.10
        assert minute["claude-sonnet-4-5", "support-v13"].out_of_set_rate == 0.30
        assert _window(row, 60).value_checks == sum(count for *_, count, _ in TRAFFIC)  # the unsplit row is whole

        # 10,000 invented model names and prompt versions: not one new label value.
        before = series_count(gateway.registry, ("tool_argument_value_check_by_model",))
        await send(
            gateway,
            [call for index in range(10_000) for call in calls_of(f"model-{index}", f"prompt-{index}", 1, index % 2)],
        )
        after = series_count(gateway.registry, ("tool_argument_value_check_by_model",))
        assert after - before <= 2  # at most the ("_other", "_other") pair, in and out of the set
        assert checks("_other", "_other", "true") + checks("_other", "_other", "false") == 10_000
    finally:
        await gateway.stop(0)


async def test_without_a_models_section_nothing_is_split(tmp_path: Path) -> None:
    write_sets_file(str(tmp_path))
    unsplit = POLICY.replace(MODELS, "")
    assert "models:" not in unsplit
    gateway = await gateway_on(tmp_path, unsplit)
    try:
        await send(gateway, calls_of("gpt-4.1-mini", "support-v13", 10, 5))
        assert series_count(gateway.registry, ("tool_argument_value_check_by_model",)) == 0
        assert await cohorts(gateway) == []
    finally:
        await gateway.stop(0)


async def test_a_prompt_version_past_its_limit_is_refused(tmp_path: Path) -> None:
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(tmp_path, POLICY)
    channel, stub = gateway_stub(gateway)
    try:
        call = calls_of("gpt-4.1-mini", "v" * 129, 1, 0)[0]
        try:
            await stub.Validate(call, timeout=5)
        except grpc.aio.AioRpcError as refused:
            assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.details() == "prompt_version is 129 characters; at most 128"
        else:
            raise AssertionError("a 129-character prompt_version was accepted")
    finally:
        await channel.close()
        await gateway.stop(0)


async def cohorts(gateway: RunningGateway) -> list[admin_pb2.CohortFigures]:
    channel, admin = admin_stub(gateway)
    async with channel:
        response = await admin.GetCohorts(
            admin_pb2.GetCohortsRequest(tool="transfer_stock", argument="warehouse_code"), timeout=5
        )
    return list(response.cohorts)


async def test_a_reload_that_stops_declaring_a_model_drops_its_series_and_the_status_still_answers(
    tmp_path: Path,
) -> None:
    write_sets_file(str(tmp_path))
    gateway = await gateway_on(tmp_path, POLICY)
    try:
        await send(gateway, calls_of("gpt-4.1-mini", "support-v13", 50, 5))
        await send(gateway, calls_of("claude-sonnet-4-5", "support-v13", 50, 5))
        (tmp_path / "policy.yaml").write_text(POLICY.replace("gpt-4.1-mini, ", ""))
        channel, admin = admin_stub(gateway)
        async with channel:
            reloaded = await admin.ReloadPolicy(
                admin_pb2.ReloadPolicyRequest(reason="CHG-7: retire gpt-4.1-mini"),
                metadata=(("x-argwatch-actor", "ana@oncall"),),
                timeout=10,
            )
        assert reloaded.outcome == "reloaded"
        models = {labels["model"] for labels in _labels(gateway, "tool_argument_value_check_by_model_total")}
        assert models == {"claude-sonnet-4-5"}  # the retired name's series are gone, not left at their last value
        await send(gateway, calls_of("gpt-4.1-mini", "support-v13", 4, 0))  # now an undeclared model
        await admin_status(gateway)  # answers: a dropped count never makes a window negative
        split = {(c.model, c.prompt_version): _window(c, 3600).value_checks for c in await cohorts(gateway)}
        assert split == {("claude-sonnet-4-5", "support-v13"): 50, ("_other", "support-v13"): 4}
    finally:
        await gateway.stop(0)


def _labels(gateway: RunningGateway, name: str) -> list[dict[str, str]]:
    return [sample.labels for family in gateway.registry.collect() for sample in family.samples if sample.name == name]


def _window(row: admin_pb2.ArgumentStatus | admin_pb2.CohortFigures, seconds: int) -> admin_pb2.WindowFigures:
    (found,) = [window for window in row.windows if window.window_seconds == seconds]
    return found
