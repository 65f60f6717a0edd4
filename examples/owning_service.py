"""A complete owning service: publishes the refunds service's reason codes, and changes them while gateways watch.

python examples/owning_service.py --listen 127.0.0.1:50061   (then point a policy's grpc source at it)
"""

from __future__ import annotations

import argparse
import asyncio

from argwatch.sources import RecordStore, ValueSetCatalog, serve


async def main(listen: str, rename_after: float) -> None:
    catalog = ValueSetCatalog()
    catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "WRONG_ITEM", "NOT_RECEIVED"])
    orders = RecordStore({("order", "ord_1"): {"customer_id": "cus_7", "paid_cents": 4200}})
    server, port = await serve(listen, catalog=catalog, records=orders)
    print(f"owning service on port {port}", flush=True)
    await asyncio.sleep(rename_after)
    # A code is renamed: every watching gateway gets the delta; the old code becomes retired.
    catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM", "WRONG_ITEM", "ITEM_NOT_RECEIVED"])
    await server.wait_for_termination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:50061", help="host:port to serve on (default: %(default)s)")
    parser.add_argument("--rename-after", type=float, default=30.0, help="seconds before a code is renamed")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.listen, arguments.rename_after))
