"""sum(list): the one function the gateway registers with CEL, for totals such as the line items' amount.

CEL has no sum: cel-go keeps math.greatest and math.least, and the CEL library
here ships its extras (cel.stdlib) as Python callbacks that add bools as 1 and
mix ints with doubles, which CEL's own `+` refuses. This one keeps CEL's
arithmetic: all ints or all doubles, never a bool, an int total within CEL's
64-bit range and a finite double total; anything else raises, so the rule is
not evaluated rather than judged on a number CEL would not have computed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def cel_sum(values: object) -> int | float:
    """The total of a list of numbers: `sum(args.items.map(i, i.price_cents * i.quantity))`, or as a method."""
    if not isinstance(values, list):
        raise TypeError(f"sum() takes a list, not {type(values).__name__}")
    if all(type(value) is int for value in values):
        total = sum(values)  # Python's ints do not overflow: the range is checked once, on the total
        if not INT_MIN <= total <= INT_MAX:
            raise OverflowError("sum() is beyond CEL's 64-bit integers")
        return total
    if all(type(value) is float for value in values):
        total_float = math.fsum(values)
        if not math.isfinite(total_float):
            raise OverflowError("sum() is not a finite number")
        return total_float
    raise TypeError("sum() adds a list of ints or a list of doubles (CEL does not mix them, nor count bools)")


FUNCTIONS: dict[str, Callable[..., Any]] = {"sum": cel_sum}


class _SumRefusals(logging.Filter):
    """Drops the CEL library's warning for a sum() that raised: the values are the model's, the rule's
    RULE_NOT_EVALUATED already says so, and one log line per such call would let a model flood the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Python function 'sum' failed")


logging.getLogger("cel").addFilter(_SumRefusals())
