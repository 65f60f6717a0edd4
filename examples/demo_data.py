"""The demo owning service's sets: refund reason codes and a large set of active user handles."""

from __future__ import annotations

import random

REASON_CODES = (
    "DAMAGED_ITEM",
    "NOT_RECEIVED",
    "WRONG_ITEM",
    "LATE_DELIVERY",
    "DUPLICATE_CHARGE",
    "CUSTOMER_CHANGED_MIND",
)
RETIRED_REASON_CODES = ("BROKEN", "LOST_IN_TRANSIT")

_FIRST = ("ana", "ben", "chen", "dara", "eli", "fatima", "gus", "hana", "ivan", "jo", "kai", "lena")
_LAST = ("smith", "garcia", "kowalski", "nguyen", "okafor", "rossi", "sato", "schmidt", "silva")


def active_handles(count: int = 2_000, seed: int = 7) -> list[str]:
    """A deterministic set of user handles such as "ana.rossi3"."""
    rng = random.Random(seed)
    handles: set[str] = set()
    while len(handles) < count:
        handles.add(f"{rng.choice(_FIRST)}.{rng.choice(_LAST)}{rng.randrange(100)}")
    return sorted(handles)


def demo_orders(
    customers: int = 20, per_customer: int = 10, seed: int = 11
) -> dict[tuple[str, str], dict[str, object]]:
    """The system of record: orders ord_000001.., each owned by one of cus_000..cus_019, with what was paid."""
    rng = random.Random(seed)
    orders: dict[tuple[str, str], dict[str, object]] = {}
    for index in range(customers * per_customer):
        orders["order", f"ord_{index + 1:06d}"] = {
            "customer_id": f"cus_{index % customers:03d}",
            "paid_cents": rng.randrange(500, 20_000),
            "status": "paid",
        }
    return orders


# The catalogue's SKUs: what create_order's line items must name.
CATALOG_SKUS = tuple(f"SKU-{family}-{size}" for family in ("TEE", "HOODIE", "CAP", "MUG", "SOCK") for size in "SML")
# Each SKU's price in cents, as the shop lists it.
SKU_PRICES = {sku: 500 + 250 * index for index, sku in enumerate(CATALOG_SKUS)}


def payment_methods(customers: int = 20) -> dict[str, list[str]]:
    """Each customer's saved payment methods (a set scoped per customer): cus_003 -> [pm_visa_0003, ...]."""
    kinds = ("visa", "amex", "sepa")
    return {
        f"cus_{index:03d}": [f"pm_{kinds[(index + n) % 3]}_{index:02d}{n:02d}" for n in range(1 + index % 3)]
        for index in range(customers)
    }
