"""Scoped value sets in the policy: `scope:` names a session field a call carries, and the opt-outs need a scope."""

from __future__ import annotations

import textwrap

import pytest

from argwatch.server.policy.loader import PolicyError, parse_policy

POLICY = """
sources:
  billing: {grpc: {target: "127.0.0.1:50061"}}
value_sets:
  billing.payment_methods: {source: billing, scope: customer_id, disclose: nearest}
  billing.currencies: {source: billing}
tools:
  pay_invoice:
    arguments:
      payment_method_id: {value_set: billing.payment_methods}
      currency: {value_set: billing.currencies}
    records:
      invoice: {source: billing, kind: invoice, id_argument: invoice_id, owner: customer_id}
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(textwrap.dedent(text).encode(), "policy.yaml")
    return [f"{issue.path}: {issue.message}" for issue in raised.value.issues]


def test_a_set_scoped_by_a_session_field_binds_its_scope_to_each_argument() -> None:
    policy = parse_policy(POLICY.encode(), "policy.yaml")
    assert policy.value_sets["billing.payment_methods"].scope == "customer_id"
    assert policy.value_sets["billing.currencies"].scope == ""
    payment, currency = policy.tools["pay_invoice"].arguments
    assert (payment.scope, payment.reveal_other_scopes) == ("customer_id", False)
    assert currency.scope == ""
    assert not policy.tools["pay_invoice"].records[0].reveal_not_owned


def test_tenant_is_a_scope_too() -> None:
    policy = parse_policy(POLICY.replace("scope: customer_id", "scope: tenant").encode(), "policy.yaml")
    assert policy.tools["pay_invoice"].arguments[0].scope == "tenant"


@pytest.mark.parametrize("field", ["account_id", "conversation_id", "", "[customer_id]"])
def test_a_scope_naming_anything_but_a_session_field_is_a_load_error_naming_it(field: str) -> None:
    errors = errors_of(POLICY.replace("scope: customer_id", f"scope: {field or 'null'}"))
    assert len(errors) == 1
    assert errors[0].startswith("value_sets.billing.payment_methods.scope: ")
    assert "is not a session field a tool call carries; expected one of customer_id, tenant" in errors[0]


def test_the_opt_outs_are_read_per_binding_and_per_record() -> None:
    text = POLICY.replace(
        "payment_method_id: {value_set: billing.payment_methods}",
        "payment_method_id: {value_set: billing.payment_methods, reveal_other_scopes: true}",
    ).replace("owner: customer_id}", "owner: customer_id, reveal_not_owned: true}")
    tool = parse_policy(text.encode(), "policy.yaml").tools["pay_invoice"]
    assert tool.arguments[0].reveal_other_scopes
    assert tool.records[0].reveal_not_owned


def test_revealing_other_scopes_of_a_global_set_or_the_owner_of_an_unowned_record_is_an_error() -> None:
    text = POLICY.replace(
        "currency: {value_set: billing.currencies}",
        "currency: {value_set: billing.currencies, reveal_other_scopes: true}",
    ).replace("owner: customer_id}", "reveal_not_owned: true}")
    assert errors_of(text) == [
        "tools.pay_invoice.arguments.currency.reveal_other_scopes: billing.currencies is not scoped "
        "(it has no scope: customer_id/tenant)",
        "tools.pay_invoice.records.invoice.reveal_not_owned: the record has no owner to check: set owner, "
        "or leave this out",
    ]
