"""What the detail view says of an argument's offending values: enum drift, inventions, or neither.

Only a set miss of shape `invented` is an invention. An id whose record the
look-up did not find, or found another customer's, is an offending value and
no invention, and a value that could not be checked is no offender at all (the
gateway never counts it). Calling such values "inventions" sent on-call after
the model during an outage of the owning service.
"""

from __future__ import annotations

from argwatch.v1 import admin_pb2

OTHER_PROBLEMS = "an id not found or not owned, out of range, the wrong type"


def offender_verdict(samples: admin_pb2.ListSamplesResponse) -> str:
    """One line: how the offending values are spread, and how many of them are inventions."""
    if not samples.total:
        return "none seen"
    share = f"{100 * samples.top_two_share:.0f}%"
    if samples.clustered:
        # Enum drift is a set's story: the values the model repeats must be set misses to tell it.
        top = [value for value in samples.values[:2] if value.count]
        if top and all(value.shape for value in top):
            spread = (
                f"CLUSTERED: the top two values hold {share} of {samples.total} "
                "(enum drift: a renamed or retired value the model keeps emitting)"
            )
        else:
            spread = f"CLUSTERED: the top two values hold {share} of {samples.total} (the same values again and again)"
    else:
        spread = f"scattered: the top two hold {share} of {samples.total}"
    return f"{spread}; {kinds(samples)}"


def kinds(samples: admin_pb2.ListSamplesResponse) -> str:
    """How many are inventions, and how many are problems that are not set misses at all."""
    parts = []
    if samples.out_of_set:
        parts.append(f"{samples.invented} of the {samples.out_of_set} not in their set invented")
    others = samples.total - samples.out_of_set
    if others:
        parts.append(f"{others} with other problems ({OTHER_PROBLEMS}): not inventions")
    return "; ".join(parts)
