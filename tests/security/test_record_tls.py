"""Issue 17.7: `tls: true` on a source holds for record look-ups as for value sets: both speak TLS to an owner
serving only TLS.

The gateway verifies owners with the system's CA roots. The test points gRPC's
roots at a throwaway CA (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, read once per
process), so it runs in a child process of its own.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from tests.service.helpers import run_program
from tests.tls_files import make_tls_files

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    import grpc
    from argwatch.server.policy.model import GrpcSourceConfig
    from argwatch.server.records.lookup_client import RecordClient
    from argwatch.server.valuesets.grpc_source import GrpcSetFetcher
    from argwatch.sources import RecordStore, ValueSetCatalog, serve

    async def main(cert, key):
        credentials = grpc.ssl_server_credentials([(open(key, "rb").read(), open(cert, "rb").read())])
        catalog = ValueSetCatalog()
        catalog.publish("refunds.reason_codes", ["DAMAGED_ITEM"])
        records = RecordStore({("order", "ord_1"): {"customer_id": "cus_7"}})
        server, port = await serve("127.0.0.1:0", catalog=catalog, records=records, credentials=credentials)
        for tls in (True, False):
            config = GrpcSourceConfig(target=f"localhost:{port}", timeout_seconds=5, tls=tls)
            client, fetcher = RecordClient(config, ttl=1), GrpcSetFetcher(config)
            found = await client.lookup("order", "ord_1", None)
            try:
                members = sorted((await fetcher.fetch("refunds.reason_codes")).members)
            except Exception as error:
                members = type(error).__name__
            print(tls, found.found, found.error.rsplit(" ", 1)[-1], members)
            await client.close()
            await fetcher.close()
        await server.stop(0)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_record_lookups_and_set_pulls_both_use_tls_when_the_source_says_so(tmp_path: Path) -> None:
    files = make_tls_files(str(tmp_path))
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": files.ca}
    out = await run_program(sys.executable, "-c", CHILD, files.server_cert, files.server_key, env=env, seconds=60)
    with_tls, plaintext = out.splitlines()
    assert with_tls == "True True  ['DAMAGED_ITEM']"
    # Plaintext to a TLS-only owner fails both ways: the check is unavailable, never a silent pass.
    assert plaintext.startswith("False False UNAVAILABLE ")
