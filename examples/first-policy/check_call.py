"""Checks one refund_order call, as the OpenAI SDK gives it, at the gateway: python check_call.py [REASON_CODE]."""

import json
import sys

from argwatch.client import Session, SyncGateway, from_openai

reason_code = sys.argv[1] if len(sys.argv) > 1 else "ITEM_DEFECTIVE"  # a code the refunds service never defined
tool_call = {
    "id": "call_1",
    "type": "function",
    "function": {
        "name": "refund_order",
        "arguments": json.dumps({"order_id": "ord_1", "amount_cents": 1200, "reason_code": reason_code}),
    },
}
with SyncGateway("127.0.0.1:50051") as gateway:
    outcome = gateway.check(from_openai(tool_call), Session(conversation_id="first-policy", customer_id="cus_1"))
print("go ahead:", outcome.go_ahead)
for problem in outcome.problems:
    print("problem:", problem.message)
if not outcome.go_ahead:
    print(outcome.tool_error)
