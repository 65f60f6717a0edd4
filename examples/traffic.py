"""Demo traffic: an agent fleet's tool calls with a realistic mix of legal values, slips and inventions.

Mostly legal values; some case and separator slips; some retired and invented
values; a few wrong types, missing arguments and unknown tools. Rejected calls
are repaired the way a model would: call Repair, then retry with a legal value.
Shop orders carry line items, a nested shipping address and a saved payment method:
now and then a line names an invented SKU, the payment method is another
customer's, or a line's quantity pushes the total past the shop's limit.
Refunds have side effects: most report their outcome, and a few time out and
are called again, the way an agent loop does after a timeout; the gateway
refuses the repeat, and the model checks the refund's status as told.

    python examples/traffic.py --target 127.0.0.1:50051 --rate 40 --duration 600
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import sys
import time
import uuid
from typing import Any

import grpc
import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_data import (
    CATALOG_SKUS,
    REASON_CODES,
    RETIRED_REASON_CODES,
    SKU_PRICES,
    active_handles,
    demo_orders,
    payment_methods,
)

from argwatch.v1 import gateway_pb2, gateway_pb2_grpc

COMPONENTS = ("billing-api", "checkout-web", "search-index", "payments-core", "identity-sso", "wms-sync")
WAREHOUSES = ("AMS-1", "AMS-2", "BER-1", "LHR-3", "MAD-1", "WAW-2")
INVENTED = {
    "reason_code": ("ITEM_DEFECTIVE", "CUSTOMER_REQUEST", "OTHER", "QUALITY_ISSUE"),
    "component_id": ("frontend", "api-gateway", "billing"),
    "warehouse_code": ("AMS-3", "LHR", "main"),
    "assignee": ("john.doe", "support-team", "admin"),
}
RETIRED = {
    "reason_code": RETIRED_REASON_CODES,
    "component_id": ("legacy-billing", "search-v1"),
    "warehouse_code": ("LHR-1",),
    "assignee": (),
}


def slip(value: str, rng: random.Random) -> str:
    """A formatting slip a model makes: wrong case, or another separator."""
    if rng.random() < 0.5:
        return value.lower() if value != value.lower() else value.upper()
    for separator in "_-.":
        if separator in value:
            return value.replace(separator, rng.choice([" ", "-" if separator != "-" else "_"]))
    return value.title()


def choose(argument: str, legal: tuple[str, ...] | list[str], rng: random.Random) -> Any:
    """A value as a model writes it: 90% legal, then slips, inventions, retired values and wrong types."""
    roll = rng.random()
    value = rng.choice(legal)
    if roll < 0.90:
        return value
    if roll < 0.93:
        return slip(value, rng)
    if roll < 0.97 or not RETIRED[argument]:
        return rng.choice(INVENTED[argument])
    if roll < 0.99:
        return rng.choice(RETIRED[argument])
    return rng.choice([120, None, True])


ORDERS = demo_orders()
ORDERS_BY_CUSTOMER: dict[str, list[tuple[str, int]]] = {}
for (_, order_id), attributes in ORDERS.items():
    ORDERS_BY_CUSTOMER.setdefault(str(attributes["customer_id"]), []).append(
        (order_id, int(attributes["paid_cents"]))  # type: ignore[call-overload]
    )


def refund_for(customer: str, rng: random.Random) -> dict[str, Any]:
    """A refund as a model writes it: mostly the customer's own order and amount; sometimes an invented
    order, another customer's order, or the amount in dollars where cents are meant (100x off)."""
    order_id, paid = rng.choice(ORDERS_BY_CUSTOMER[customer])
    amount = rng.randrange(100, paid + 1)
    roll = rng.random()
    if roll < 0.03:
        order_id = f"ord_9{rng.randrange(10**5):05d}"  # fabricated
    elif roll < 0.05:
        other = rng.choice([c for c in ORDERS_BY_CUSTOMER if c != customer])
        order_id, paid = rng.choice(ORDERS_BY_CUSTOMER[other])  # real, but someone else's
    elif roll < 0.07:
        amount *= 100  # dollars meant, cents written the other way round
    return {"order_id": order_id, "reason_code": choose("reason_code", REASON_CODES, rng), "amount_cents": amount}


PAYMENT_METHODS = payment_methods()
COUNTRIES = ("DE", "FR", "NL", "PL", "ES")
INVENTED_SKUS = ("SKU-TEE-XL", "SKU-JACKET-M", "TEE-M", "SKU-MUG-2")


def order_for(customer: str, rng: random.Random) -> dict[str, Any]:
    """A shop order as a model writes it: lines from the catalogue, paid with one of the customer's own
    methods; sometimes an invented SKU in one line, a slip, another customer's payment method, or a
    quantity that takes the total past the shop's limit (a rule over the items)."""
    lines = []
    for _ in range(rng.randrange(1, 5)):
        sku = rng.choice(CATALOG_SKUS)
        lines.append({"sku": sku, "quantity": rng.randrange(1, 4), "price_cents": SKU_PRICES[sku]})
    args: dict[str, Any] = {"items": lines, "payment_method_id": rng.choice(PAYMENT_METHODS[customer])}
    if rng.random() < 0.6:
        args["shipping"] = {"country": rng.choice(COUNTRIES)}
    roll = rng.random()
    if roll < 0.04:
        lines[-1]["sku"] = rng.choice(INVENTED_SKUS)
    elif roll < 0.06:
        lines[0]["sku"] = slip(lines[0]["sku"], rng)
    elif roll < 0.08:
        other = rng.choice([c for c in PAYMENT_METHODS if c != customer])
        args["payment_method_id"] = rng.choice(PAYMENT_METHODS[other])  # real, but someone else's
    elif roll < 0.10:
        lines[0]["quantity"] = 200  # at least 100,000 cents: past the limit whatever the SKU
    return args


def make_call(rng: random.Random, handles: list[str], customer: str = "cus_000") -> tuple[str, dict[str, Any]]:
    """One tool call of the demo mix: (tool name, arguments)."""
    roll = rng.random()
    if roll < 0.40:
        return "refund_order", refund_for(customer, rng)
    if roll < 0.55:
        return "create_order", order_for(customer, rng)
    if roll < 0.75:
        args: dict[str, Any] = {
            "component_id": choose("component_id", COMPONENTS, rng),
            "title": "Checkout fails for some customers",
        }
        if rng.random() < 0.7:
            args["assignee"] = choose("assignee", handles, rng)
        return "create_ticket", args
    if roll < 0.995:
        return "transfer_stock", {
            "sku": f"SKU-{rng.randrange(10**5)}",
            "warehouse_code": choose("warehouse_code", WAREHOUSES, rng),
            "quantity": rng.randrange(1, 50),
        }
    return rng.choice(["refund_orders", "issue_refund", "delete_account"]), {"id": "x"}


# The models the demo fleet runs, one per conversation (the last is one the demo policy does not declare).
MODELS = ("gpt-4.1-mini", "claude-sonnet-4-5", "llama-3.3-70b")


def request_for(tool: str, args: dict[str, Any], conversation: str, customer: str) -> gateway_pb2.ValidateRequest:
    return gateway_pb2.ValidateRequest(
        tool=tool,
        arguments_json=orjson.dumps(args),
        conversation_id=conversation,
        call_id=uuid.uuid4().hex,
        session=session_of(customer),
        model=MODELS[int(conversation[:4], 16) % len(MODELS)],  # the conversation's, on every call of it
        prompt_version="support-v13",
    )


def session_of(customer: str) -> gateway_pb2.Session:
    return gateway_pb2.Session(customer_id=customer, tenant="demo")


def repair_request(call_id: str, conversation: str, customer: str) -> gateway_pb2.RepairRequest:
    """Repair names the call with the conversation and session its Validate had: a call is found only there."""
    return gateway_pb2.RepairRequest(call_id=call_id, conversation_id=conversation, session=session_of(customer))


async def repair_and_retry(
    stub: gateway_pb2_grpc.GatewayStub,
    rejected: gateway_pb2.ValidateResponse,
    tool: str,
    args: dict[str, Any],
    conversation: str,
    customer: str,
) -> bool:
    """What a model does with a rejection: read the repair message, retry with an offered value."""
    repair = await stub.Repair(repair_request(rejected.call_id, conversation, customer), timeout=2)
    if repair.give_up:
        return False
    fixed = orjson.loads(orjson.dumps(args))  # a deep copy: values are put back where the problem says
    for legal in repair.legal_values:
        if legal.values:
            put_at(fixed, legal.argument, legal.values[0])
    retry = await stub.Validate(request_for(tool, fixed, conversation, customer), timeout=2)
    return retry.decision == gateway_pb2.DECISION_ALLOW


def put_at(args: dict[str, Any], path: str, value: str) -> None:
    """Sets the value at a problem's path (`reason_code`, `items[2].sku`, `shipping.country`)."""
    steps: list[str | int] = [int(s[1:-1]) if s.startswith("[") else s for s in re.findall(r"\[\d+\]|[^.\[\]]+", path)]
    node: Any = args
    for step in steps[:-1]:
        node = node[step]
    node[steps[-1]] = value


async def after_refund(
    stub: gateway_pb2_grpc.GatewayStub,
    allowed: gateway_pb2.ValidateResponse,
    args: dict[str, Any],
    conversation: str,
    customer: str,
    rng: random.Random,
) -> bool:
    """What happens after an allowed refund: its outcome is reported, or it times out and the agent calls it
    again. True when a repeat was refused."""
    roll = rng.random()
    if roll < 0.90:
        outcome = gateway_pb2.OUTCOME_SUCCEEDED if roll < 0.85 else gateway_pb2.OUTCOME_FAILED
        report = gateway_pb2.ReportOutcomeRequest(
            call_id=allowed.call_id, outcome=outcome, conversation_id=conversation, session=session_of(customer)
        )
        await stub.ReportOutcome(report, timeout=2)
        return False
    if roll > 0.95:
        return False  # nobody reported anything
    # A timeout: the agent loop calls the refund again, unchanged.
    repeat = await stub.Validate(request_for("refund_order", args, conversation, customer), timeout=2)
    if repeat.decision != gateway_pb2.DECISION_REJECT:
        return False
    await stub.Repair(repair_request(repeat.call_id, conversation, customer), timeout=2)
    # The model does as the repair message says: it asks for the refund's status first.
    status = {"order_id": args.get("order_id")}
    await stub.Validate(request_for(repeat.repeat_of.status_tool, status, conversation, customer), timeout=2)
    return True


async def run(target: str, rate: float, duration: float, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    handles = active_handles()
    counts = {"sent": 0, "allowed": 0, "rejected": 0, "repaired": 0, "repeats_refused": 0, "errors": 0}
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stopping.set)
    async with grpc.aio.insecure_channel(target) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        deadline = time.monotonic() + duration
        interval = 1.0 / rate
        next_at = time.monotonic()
        while time.monotonic() < deadline and not stopping.is_set():
            conversation = uuid.uuid4().hex
            customer = rng.choice(sorted(ORDERS_BY_CUSTOMER))
            tool, args = make_call(rng, handles, customer)
            try:
                response = await stub.Validate(request_for(tool, args, conversation, customer), timeout=2)
                counts["sent"] += 1
                if response.decision == gateway_pb2.DECISION_REJECT:
                    counts["rejected"] += 1
                    if await repair_and_retry(stub, response, tool, args, conversation, customer):
                        counts["repaired"] += 1
                else:
                    counts["allowed"] += 1
                    refund = tool == "refund_order" and response.idempotency_key
                    if refund and await after_refund(stub, response, args, conversation, customer, rng):
                        counts["repeats_refused"] += 1
            except grpc.aio.AioRpcError:
                counts["errors"] += 1
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--rate", type=float, default=40.0, help="calls per second")
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds, then stop")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    counts = asyncio.run(run(args.target, args.rate, args.duration, args.seed))
    print("traffic:", " ".join(f"{k}={v}" for k, v in counts.items()), file=sys.stderr)


if __name__ == "__main__":
    main()
