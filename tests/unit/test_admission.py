"""Admission: unary calls keep the places streams cannot take, one peer holds at most its share, all counted."""

from __future__ import annotations

from argwatch.server.edge.admission import Admission, Limits, peer_host


def test_unary_calls_keep_room_that_streams_cannot_take_and_every_refusal_names_its_limit() -> None:
    shed: list[str] = []
    open_now: list[int] = []
    admission = Admission(Limits(max_rpcs=5, max_streams=3, max_streams_per_peer=2), shed.append, open_now.append)
    assert admission.enter_stream("ipv4:10.0.0.1") == ""
    assert admission.enter_stream("ipv4:10.0.0.1") == ""
    assert "--max-streams-per-peer" in admission.enter_stream("ipv4:10.0.0.1")
    assert admission.enter_stream("ipv4:10.0.0.2") == ""
    assert "--max-streams" in admission.enter_stream("ipv4:10.0.0.3")
    assert admission.enter_unary() == "" and admission.enter_unary() == ""  # the two places streams left
    assert "--max-concurrent-rpcs" in admission.enter_unary()
    assert shed == ["streams_per_peer", "streams", "rpcs"]
    admission.leave_unary()
    assert admission.enter_unary() == ""
    for peer in ("ipv4:10.0.0.1", "ipv4:10.0.0.1", "ipv4:10.0.0.2"):
        admission.leave_stream(peer)
    assert admission.streams == 0 and open_now[-1] == 0
    assert len(admission._by_peer) == 0  # a peer holding nothing is not remembered


def test_a_peer_is_its_address_whatever_its_port() -> None:
    assert peer_host("ipv4:127.0.0.1:51234") == "ipv4:127.0.0.1"
    assert peer_host("ipv6:[::1]:51234") == "ipv6:[::1]"
    assert peer_host("unix:/run/argwatch.sock") == "unix:/run/argwatch.sock"
