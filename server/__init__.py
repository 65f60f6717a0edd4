"""argwatch.server: the gateway process. Internal: no import path here is a stable API.

The folders are the architecture, from the wire inwards:

- `edge/`       the wire edge: gRPC servicers, protobuf <-> domain translation, Admin API auth, listener limits
- `verdict/`    the pure core: (tool policy, arguments, snapshots, records found) -> every problem; no I/O
- `validator/`  one call end to end: snapshots and records in, the core, the mode, telemetry out
- `policy/`     the policy model, its YAML loader, CEL rules, tool definitions imported and exported
- `valuesets/`  snapshots of value sets, the sources they come from, and the provider that keeps them live
- `records/`    look-ups in the system of record, and the existence and ownership checks on them
- `repair/`     the model-facing message for a rejected call, and the repair loop measured
- `modes/`      observe/reject per tool, on-call overrides and their audit, on one replica or the fleet
- `state/`      what is remembered between calls: the shared cache, side-effect operations, atomic files
- `telemetry/`  Prometheus metrics, the sampled value log, the Admin API's windows and reports
- `process/`    building and running the process: settings, TLS, workers, background tasks
- `cli/`        the `argwatch` command (where the sides meet: it builds the TUI's commands too)

The public Python surfaces are elsewhere: `argwatch.client` (agents), `argwatch.sources` (owning
services) and the generated `argwatch.v1` stubs.
"""
