"""The demo owning service: a real ValueSetSource (refunds, identity, catalogue and payment sets) and RecordSource
(orders) server.

python examples/demo_source.py --listen 127.0.0.1:50061
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_data import CATALOG_SKUS, REASON_CODES, RETIRED_REASON_CODES, active_handles, demo_orders, payment_methods

from argwatch.sources import RecordStore, ValueSetCatalog, serve


def demo_catalog() -> ValueSetCatalog:
    catalog = ValueSetCatalog()
    catalog.publish("refunds.reason_codes", REASON_CODES, RETIRED_REASON_CODES)
    catalog.publish("identity.active_handles", active_handles())
    catalog.publish("catalog.skus", CATALOG_SKUS)
    # Scoped per customer: a call is judged against its own customer's methods only, and repair lists only those.
    catalog.publish("payments.methods", members_by_scope=payment_methods())
    return catalog


async def churn(catalog: ValueSetCatalog, every: float) -> None:
    """People join and leave: every `every` seconds one handle is added and the oldest removed (a delta)."""
    joined = 0
    while True:
        await asyncio.sleep(every)
        current = catalog.get("identity.active_handles")
        assert current is not None
        joined += 1
        catalog.remove("identity.active_handles", [min(current.members)])
        published = catalog.add("identity.active_handles", [f"new.hire{joined}"])
        logging.info("identity.active_handles: version %d (new.hire%d joined)", published.version, joined)


async def run(listen: str, churn_every: float) -> None:
    catalog = demo_catalog()
    server, _ = await serve(listen, catalog=catalog, records=RecordStore(demo_orders()))
    logging.info("demo owning service on %s", listen)
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stopping.set)
    churning = asyncio.create_task(churn(catalog, churn_every)) if churn_every > 0 else None
    await stopping.wait()
    if churning is not None:
        churning.cancel()
    await server.stop(1.0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:50061")
    parser.add_argument("--churn-every", type=float, default=20.0, help="seconds between handle changes (0: none)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s demo-source: %(message)s")
    arguments = parser.parse_args()
    asyncio.run(run(arguments.listen, arguments.churn_every))
