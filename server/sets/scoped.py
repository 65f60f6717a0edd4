"""Scoped value sets: each member held as the key scope + NUL + value, so one set's tables serve every scope.

A set scoped by a session field (customer_id, tenant) holds each scope's own
members. Keyed this way, the member set, the compact indexes, deltas layered
over large sets, the retired history, saved copies and the shared cache all
work as for a global set, and nothing of one scope is found from another:

- a call's value is looked up as its own scope's key, never as a bare value;
- normalised indexes normalise the value part only (`within_scope`), so no
  case or separator slip reaches across scopes (two customers "CUS-1" and
  "cus_1" stay apart);
- a scope is never empty, never longer than MAX_SCOPE_CHARS and never holds
  NUL, so a key splits one way only: at its first NUL.

Two tables more than a global set has: `ScopeListing` (scope -> its keys, what
repair lists) and a value -> key index (over the value part; packed.py for large sets),
which tells the counts that a miss is another scope's member rather than an
invention. Neither is ever told to the model unless the policy opts out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from itertools import chain, islice
from types import MappingProxyType

SEPARATOR = "\x00"
MAX_SCOPE_CHARS = 256
CHUNK = 1024


class MalformedScope(ValueError):
    """A scoped member whose scope is empty, too long or holds NUL: the update is refused whole."""


def usable_scope(scope: str) -> bool:
    """Whether a session field's value can name a scope (a call whose value cannot is judged against none)."""
    return 0 < len(scope) <= MAX_SCOPE_CHARS and SEPARATOR not in scope


def usable_key(key: str) -> bool:
    """Whether a scoped member's key names a usable scope (a delta's keys are judged by this)."""
    scope, separator, _ = key.partition(SEPARATOR)
    return bool(separator) and 0 < len(scope) <= MAX_SCOPE_CHARS


def scope_key(scope: str, value: str) -> str:
    return scope + SEPARATOR + value


def split_key(key: str) -> tuple[str, str]:
    """(scope, value) of a key: split at its first NUL, which a scope never holds."""
    scope, _, value = key.partition(SEPARATOR)
    return scope, value


def value_of(key: str) -> str:
    return key.partition(SEPARATOR)[2]


def within_scope(apply: Callable[[str], str]) -> Callable[[str], str]:
    """`apply` on a key's value part only, its scope kept as is (a key without NUL: on the whole of it)."""

    def scoped(key: str) -> str:
        scope, separator, value = key.partition(SEPARATOR)
        return scope + separator + apply(value) if separator else apply(key)

    return scoped


class ScopeListing:
    """scope -> the keys of its members, in source order: built by `add_all`, frozen by `freeze_steps`, then read.

    A dict of tuples: per scope one dict entry, the scope's string and a tuple of references to keys the member
    set already holds. For sets of up to PACK_ABOVE members; a packed set chains its scopes' members (packed.py).
    """

    __slots__ = ("_lists",)

    def __init__(self) -> None:
        self._lists: dict[str, list[str] | tuple[str, ...]] = {}

    def add_all(self, keys: Iterable[str]) -> None:
        lists = self._lists
        for key in keys:
            scope, separator, _ = key.partition(SEPARATOR)
            if not scope or not separator or len(scope) > MAX_SCOPE_CHARS:
                raise MalformedScope(f"a scoped member with no usable scope: {key[:80]!r}")
            held = lists.get(scope)
            if held is None:
                lists[scope] = [key]
            else:
                held.append(key)  # type: ignore[union-attr]

    def freeze_steps(self) -> Iterator[None]:
        """Each scope's list made a tuple (exactly sized, and immutable), CHUNK scopes a step."""
        lists = self._lists
        scopes = iter(list(lists))
        while chunk := list(islice(scopes, CHUNK)):
            for scope in chunk:
                lists[scope] = tuple(lists[scope])
            yield

    def mapping(self) -> Mapping[str, Sequence[str]]:
        return MappingProxyType(self._lists)


class OverlayListing(Mapping[str, Sequence[str]]):
    """A base listing with a delta's removed keys left out and its added keys appended: O(one scope) a read."""

    __slots__ = ("added", "base", "removed")

    def __init__(
        self, base: Mapping[str, Sequence[str]], added: Mapping[str, tuple[str, ...]], removed: Set[str]
    ) -> None:
        self.base, self.added, self.removed = base, added, removed

    @classmethod
    def layered(
        cls,
        previous: Mapping[str, Sequence[str]],
        gained: Iterable[str],
        lost: Iterable[str],
        removed: Set[str],
        *,
        on_top: bool = False,
    ) -> OverlayListing:
        """The listing after a delta that put `gained` keys in the added layer and took `lost` ones out of it:
        the previous layer's scopes copied (C-level), only the scopes the delta touches listed again; with
        `on_top`, a new layer over `previous` whole."""
        if isinstance(previous, OverlayListing) and not on_top:
            base, added = previous.base, dict(previous.added)
        else:
            base, added = previous, {}
        touched: dict[str, tuple[set[str], set[str]]] = {}
        for keys, side in ((gained, 0), (lost, 1)):
            for key in keys:
                touched.setdefault(split_key(key)[0], (set(), set()))[side].add(key)
        for scope, (put, taken) in touched.items():
            keys = (set(added.get(scope, ())) - taken) | put
            if keys:
                added[scope] = tuple(sorted(keys))
            else:
                added.pop(scope, None)
        return cls(base, added, removed)

    def __getitem__(self, scope: str) -> Sequence[str]:
        removed = self.removed
        listed = (*(key for key in self.base.get(scope, ()) if key not in removed), *self.added.get(scope, ()))
        if not listed:  # a scope the deltas emptied is gone, as in a listing built whole
            raise KeyError(scope)
        return listed

    def __iter__(self) -> Iterator[str]:
        """The scopes holding a key (O(the keys) in all: a whole listing's read, as an export makes)."""
        removed = self.removed
        for scope in chain(self.base, (scope for scope in self.added if scope not in self.base)):
            if scope in self.added or any(key not in removed for key in self.base.get(scope, ())):
                yield scope

    def __len__(self) -> int:
        return sum(1 for _ in self)


class ScopeMembers(Set[str]):
    """One scope's members as plain values: what repair lists and searches, never another scope's."""

    __slots__ = ("_keys", "_members", "_prefix")

    def __init__(self, scope: str, keys: Sequence[str], members: Set[str]) -> None:
        self._prefix = scope + SEPARATOR
        self._keys = keys
        self._members = members  # the whole set's keys, for membership

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and self._prefix + value in self._members

    def __iter__(self) -> Iterator[str]:
        cut = len(self._prefix)
        return (key[cut:] for key in self._keys)

    def __len__(self) -> int:
        return len(self._keys)
