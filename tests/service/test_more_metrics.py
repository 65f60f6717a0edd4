"""The metrics the alerts and the dashboard read: Validate time as a histogram, each set's version."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from argwatch.server.telemetry.metrics import GatewayMetrics
from tests.conftest import GatewayFactory
from tests.service.helpers import gateway_stub, request, value


async def test_validate_time_and_set_versions_are_exported(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    channel, stub = gateway_stub(gateway)
    async with channel:
        for _ in range(7):
            await stub.Validate(request("refund_order", {"reason_code": "DAMAGED_ITEM"}), timeout=5)
    registry = gateway.registry
    assert value(registry, "argwatch_validate_seconds_count") == 7
    assert value(registry, "argwatch_validate_seconds_bucket", le="+Inf") == 7
    assert 0 < value(registry, "argwatch_validate_seconds_sum") < 7
    assert value(registry, "argwatch_value_set_version", set="refunds.reason_codes") == 1
    assert value(registry, "argwatch_value_set_version", set="wms.warehouses") == 3


def test_the_histogram_counts_each_value_in_the_first_bucket_that_holds_it() -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    for seconds in (0.0001, 0.0002, 0.003, 2.0):
        metrics.validate_seconds.observe(seconds)
    registry = metrics.registry
    buckets = {
        le: value(registry, "argwatch_validate_seconds_bucket", le=le)
        for le in ("0.0001", "0.00025", "0.005", "1.0", "+Inf")
    }
    assert buckets == {"0.0001": 1, "0.00025": 2, "0.005": 3, "1.0": 3, "+Inf": 4}
    assert value(registry, "argwatch_validate_seconds_count") == 4
