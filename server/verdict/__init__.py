"""The pure core: (tool policy, arguments, value-set snapshots, records found) -> every problem found.

Value-set membership (set_checks), the JSON Schema (schema_checks) and the CEL
rules (rule_checks). No gRPC, no generated code, no I/O
(tests/unit/test_layering.py holds it to that). Bad input is a problem in the
result, never an exception.
"""
