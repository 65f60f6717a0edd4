"""A call's scope: its conversation bound to its session, so that no two conversations' records meet."""

from __future__ import annotations

from argwatch.server.state.call_scope import call_key, conversation_scope


def test_no_choice_of_strings_makes_two_scopes_meet() -> None:
    """A conversation id written to look like another's hashed scope, sent with no session, is another scope;
    and the length prefix keeps ("a", "bc") apart from ("ab", "c")."""
    bound = conversation_scope("c1", "cus_1", "")
    assert bound.startswith("s1:")
    assert conversation_scope(bound, "", "") != bound
    assert conversation_scope("c1", "", "") == "c1"  # no session: the keys of callers that send none stay
    assert conversation_scope("a", "bc", "") != conversation_scope("ab", "c", "")
    assert call_key("a", "bc") != call_key("ab", "c")
