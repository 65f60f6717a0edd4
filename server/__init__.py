"""The gateway: policy, checker, value-set provider, modes, telemetry, servicers and command line."""
