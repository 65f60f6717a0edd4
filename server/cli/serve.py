"""`argwatch serve`: settings from flags and the environment, one process or several workers, run until a signal.

SIGTERM and SIGINT drain and stop; SIGHUP reloads the policy (process/reload.py).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from argwatch.server.policy.loader import PolicyError, load_policy
from argwatch.server.policy.model import Policy
from argwatch.server.process.settings import Settings, settings_from
from argwatch.server.process.workers import check_workers, run_workers

if TYPE_CHECKING:
    from argwatch.server.process.app import RunningGateway

log = logging.getLogger("argwatch.cli")


def run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    settings = settings_from(args, environ)  # ValueError: a usage error, named by main()
    check_workers(settings)
    logging.basicConfig(
        level=settings.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        policy = load_policy(settings.policy)
    except PolicyError as error:  # reported once, before any worker starts
        print(error, file=sys.stderr)
        print("argwatch: refusing to start with an invalid policy", file=sys.stderr)
        return 2
    try:
        shadow = load_policy(settings.shadow_policy) if settings.shadow_policy else None
    except PolicyError as error:  # a flag asked for it: serving without it would hide that it is not there
        print(error, file=sys.stderr)
        print("argwatch: refusing to start with an invalid shadow policy (--shadow-policy)", file=sys.stderr)
        return 2
    if settings.workers > 1:
        return run_workers(list(args.argv), settings)
    return asyncio.run(_run(settings, policy, shadow))


async def _run(settings: Settings, policy: Policy, shadow: Policy | None = None) -> int:
    from argwatch.server.modes.store import ModeRefused
    from argwatch.server.process.app import build_gateway
    from argwatch.server.telemetry.samples import attach_sample_sink

    detach = attach_sample_sink(settings.sample_log)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    # Until the gateway serves, a SIGHUP is noted and served once it does (it used to kill the process, 129).
    reload_wanted = asyncio.Event()
    loop.add_signal_handler(signal.SIGHUP, reload_wanted.set)
    try:
        gateway = await build_gateway(settings, policy=policy, shadow_policy=shadow)
    except (OSError, ValueError, ModeRefused) as error:
        log.error("cannot start: %s", error)
        detach()
        return 2
    reloads = loop.create_task(_reload_on_hangup(gateway, reload_wanted))
    # Everything built so far lives as long as the process: exempt it from the
    # collector's scans, which otherwise grow with every long-lived object.
    gc.freeze()
    await stopping.wait()
    log.info("signal received: draining (up to %.1fs)", settings.grace_seconds)
    reloads.cancel()
    await gateway.stop()
    detach()
    return 0


async def _reload_on_hangup(gateway: RunningGateway, wanted: asyncio.Event) -> None:
    """Each SIGHUP reloads the policy; several arriving during one reload make one more."""
    while True:
        await wanted.wait()
        wanted.clear()
        log.info("SIGHUP: reloading the policy from %s", gateway.settings.policy)
        try:
            await gateway.reload(actor="SIGHUP", reason="SIGHUP")
        except Exception:  # a reload that breaks must not end the process's reloads, nor the process
            log.exception("SIGHUP: the reload failed; the policy in use keeps serving")
