"""argwatch.common: the few ideas the gateway, the TUI and the Python client share, written once. Internal.

- `durations`  the one duration grammar (policy files, flags, the TUI's expiry)
- `backoff`    reconnect delays with full jitter (the gateway to owners, the TUI to the gateway)
- `channels`   the one gRPC channel factory (TLS, mTLS, service config)
- `tls_flags`  the TLS flags of every command that calls a gateway, parsed one way

Nothing here imports the server, the TUI, Textual or generated code, so each side
can import it without pulling in the others (tests/unit/test_layering.py).
"""
