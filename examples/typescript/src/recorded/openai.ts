// OpenAI API response bodies in the API's JSON shape, checked against the OpenAI Node SDK's own types.
//
// Each body is JSON pasted as is (JSON is a TypeScript expression), declared as the SDK's type, so tsc
// checks it against that type (every required field, no unknown one) and an SDK upgrade that changes the
// shape fails the build here. They were not captured
// from a live call (no network here): they follow the API reference's example bodies, with the ids,
// arguments and model of a refunds agent.
import type { ChatCompletion } from "openai/resources/chat/completions";
import type { ResponseOutputItem } from "openai/resources/responses/responses";

// A Chat Completions answer with two parallel tool calls: an invented reason code, then a legal one.
export const chatCompletion: ChatCompletion = {
  "id": "chatcmpl-CL4pZ1wq8sGx0kTnRfY7bVd2HmEaJ",
  "object": "chat.completion",
  "created": 1764460800,
  "model": "gpt-4.1-mini-2025-04-14",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": null,
        "tool_calls": [
          {
            "id": "call_Qm3XsV8dK1pT6yLwZr0Nc4Hb",
            "type": "function",
            "function": {
              "name": "refund_order",
              "arguments": "{\"order_id\":\"ord_0012345678\",\"reason_code\":\"ITEM_DEFECTIVE\",\"amount_cents\":1200}"
            }
          },
          {
            "id": "call_Wf7JbN2eR5uC9aGqXo1Ls8Dv",
            "type": "function",
            "function": {
              "name": "refund_order",
              "arguments": "{\"order_id\":\"ord_0012345679\",\"reason_code\":\"DAMAGED_ITEM\",\"amount_cents\":800}"
            }
          }
        ],
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "tool_calls"
    }
  ],
  "usage": {
    "prompt_tokens": 212,
    "completion_tokens": 61,
    "total_tokens": 273,
    "prompt_tokens_details": { "cached_tokens": 0, "audio_tokens": 0 },
    "completion_tokens_details": {
      "reasoning_tokens": 0,
      "audio_tokens": 0,
      "accepted_prediction_tokens": 0,
      "rejected_prediction_tokens": 0
    }
  },
  "service_tier": "default",
  "system_fingerprint": "fp_6f2eabb9a5"
};

// A Responses API output item: a function call with an invented reason code.
export const responsesOutput: ResponseOutputItem[] = [
  {
    "id": "fc_68f0a1c2d3e4f5a6b7c8d9e0f1a2b3c4",
    "type": "function_call",
    "status": "completed",
    "arguments": "{\"order_id\":\"ord_0012345678\",\"reason_code\":\"GOODWILL\"}",
    "call_id": "call_Hd4TqW9zP2mK7vBxYs5Rn1Ge",
    "name": "refund_order"
  }
];
