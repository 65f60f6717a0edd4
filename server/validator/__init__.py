"""One call judged: every check run, the mode applied, the verdict counted (the general path and the quick one)."""

from argwatch.server.validator.validator import REDACTED, ShadowTap, Validator

__all__ = ["REDACTED", "ShadowTap", "Validator"]
