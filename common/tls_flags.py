"""The TLS options of every command that calls a gateway (tui, watch, report, tools export), parsed one way."""

from __future__ import annotations

import argparse
import os

from argwatch.common.channels import ChannelSecurity


def add_tls_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--tls-ca", default="", metavar="FILE", help="CA bundle to verify the gateway with (TLS)")
    group.add_argument("--tls-cert", default="", metavar="FILE", help="client certificate, for mTLS")
    group.add_argument("--tls-key", default="", metavar="FILE", help="client private key, for mTLS")
    group.add_argument("--tls-server-name", default="", help="the name in the gateway's certificate, if not the host")


def security_from(args: argparse.Namespace) -> ChannelSecurity:
    """The channel security the options describe; ValueError names an option that cannot work."""
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ValueError("--tls-cert and --tls-key go together (mTLS needs both)")
    if args.tls_cert and not args.tls_ca:
        raise ValueError("--tls-cert needs --tls-ca (mTLS is TLS with a client certificate)")
    for option in ("tls_ca", "tls_cert", "tls_key"):
        path = getattr(args, option)
        if path and not os.path.isfile(path):
            raise ValueError(f"--{option.replace('_', '-')} {path}: no such file")
    return ChannelSecurity(
        ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key, server_name=args.tls_server_name
    )
