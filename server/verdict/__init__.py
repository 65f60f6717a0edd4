"""The pure core: (tool policy, arguments, value-set snapshots) -> every problem found.

No gRPC, no generated code, no I/O (tests/unit/test_layering.py holds it to that). Bad input is a problem in the
result, never an exception."""
