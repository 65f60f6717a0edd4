"""--redis URLs: one Redis, Sentinel and Cluster forms read as written; a malformed one refused with what is wrong."""

from __future__ import annotations

import argparse

import pytest
from redis.asyncio.sentinel import MasterNotFoundError

from argwatch.server.process.settings import add_serve_arguments, settings_from
from argwatch.server.state.redis_connect import describe_error
from argwatch.server.state.redis_url import RedisKind, RedisTarget, parse_redis_url


def test_one_redis_keeps_its_form() -> None:
    assert parse_redis_url("redis://:s3cret@cache.internal:6380/2") == RedisTarget(
        RedisKind.SINGLE, (("cache.internal", 6380),), "", 2, None, "s3cret", False
    )
    assert parse_redis_url("rediss://cache").tls and parse_redis_url("rediss://cache").hosts == (("cache", 6379),)


def test_sentinel_names_its_sentinels_service_and_database() -> None:
    target = parse_redis_url("redis+sentinel://:pw@s1:26380,s2,[::1]:26381/argwatch-main/3")
    assert target.kind is RedisKind.SENTINEL
    assert target.hosts == (("s1", 26380), ("s2", 26379), ("::1", 26381))
    assert (target.service, target.db, target.password) == ("argwatch-main", 3, "pw")
    assert parse_redis_url("redis+sentinel://s1/argwatch").db == 0


def test_cluster_names_its_seed_nodes() -> None:
    target = parse_redis_url("redis+cluster://user:pw@n1:7000,n2:7001")
    assert (target.kind, target.hosts, target.username, target.password) == (
        RedisKind.CLUSTER,
        (("n1", 7000), ("n2", 7001)),
        "user",
        "pw",
    )
    assert parse_redis_url("redis+cluster://n1/").hosts == (("n1", 6379),)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://cache:6379", "scheme 'http'"),
        ("cache:6379", "expected redis://"),
        ("redis+sentinel://s1:26379", "needs the name of the primary"),
        ("redis+sentinel://s1/argwatch/zero", "a Redis database is a number"),
        ("redis+sentinel://s1/a/0/extra", "too many parts"),
        ("redis+cluster://n1:7000/1", "only database 0"),
        ("redis+cluster://n1:70000", "from 1 to 65535"),
        ("redis+cluster://n1,,n2", "an empty host"),
        ("redis+cluster://n1?timeout=1", "no query"),
        ("rediss+sentinel://:hunter2@s1/argwatch", "TLS with Sentinel or Cluster is not supported"),
        ("redis://a:1,b:2/0", "several hosts are for redis+sentinel://"),
        ("redis:///0", "no host"),
        ("redis+sentinel://:hunter2/x@s1/argwatch", "as %2F or %40"),
        ("rediss+cluster://:hunter2/x@n1", "as %2F or %40"),
        ("redis://:hunter2/x@cache:6379/0", "as %2F or %40"),
    ],
)
def test_a_malformed_url_is_refused_with_what_is_wrong(url: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_redis_url(url)
    assert said in str(refused.value)
    assert "hunter2" not in str(refused.value)  # the password is never echoed


def test_serve_refuses_a_malformed_url_at_start_up_from_the_flag_or_the_environment() -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    with pytest.raises(ValueError, match="--redis: redis\\+sentinel:// needs the name"):
        settings_from(parser.parse_args(["--policy", "p", "--redis", "redis+sentinel://s1:26379"]), {})
    with pytest.raises(ValueError, match="ARGWATCH_REDIS: a Redis Cluster has only database 0"):
        settings_from(parser.parse_args(["--policy", "p"]), {"ARGWATCH_REDIS": "redis+cluster://n1/2"})
    settings = settings_from(parser.parse_args(["--policy", "p", "--redis", "redis+cluster://n1:7000,n2"]), {})
    assert settings.redis == "redis+cluster://n1:7000,n2"


def test_a_sentinel_deployment_without_a_primary_is_described_by_its_cause_without_the_password() -> None:
    url = "redis+sentinel://:hunter2@s1,s2:26380/argwatch"
    failing_over = describe_error(MasterNotFoundError("No master found for 'argwatch'"), url)
    assert "know no healthy primary for 'argwatch' (a failover under way" in failing_over
    one_silent = MasterNotFoundError("No master found for 'argwatch' : <Redis(<Pool(<Conn(host=s1)>)>)> - E('x')")
    assert "1 of 2 did not answer" in describe_error(one_silent, url)
    silent = "<Redis(<Pool(<Conn(password=<REDACTED>)>)>)> - ConnectionError('refused')"
    none = describe_error(MasterNotFoundError(f"No master found for 'argwatch' : {silent}, {silent}"), url)
    assert none == "no sentinel answered (sentinel s1:26379,s2:26380 service 'argwatch' db 0)"
    assert all("hunter2" not in said for said in (failing_over, none))
