// The OpenAI Node SDK's own objects in and out: its tool calls to argwatch calls, refusals to its param types.
//
// Only the SDK's types are imported (erased at build time): nothing here constructs a client or reaches
// the API. `openai` is a plain dependency of this example package; a published package would make it an
// optional peer dependency, since these functions need its types and nothing of its code.
import type {
  ChatCompletion,
  ChatCompletionMessageToolCall,
  ChatCompletionToolMessageParam,
} from "openai/resources/chat/completions";
import type { ResponseFunctionToolCall, ResponseInputItem } from "openai/resources/responses/responses";
import { gate, type CallContext, type Gated, type ToolCall } from "../argwatch";
import type { GatewayClient } from "../generated/argwatch/v1/Gateway";

// A call as argwatch takes it, and the tool result that answers it in the provider's own shape.
export interface ProviderToolCall<Result> extends ToolCall {
  callId: string;
  toolError(message: string): Result;
}

// A Chat Completions tool call (`message.tool_calls[i]`). The arguments go as the model wrote them, byte
// for byte. A custom tool's input is free text, sent as written: the gateway checks JSON-object arguments,
// so a policy should name function tools only.
export function fromChatCompletion(toolCall: ChatCompletionMessageToolCall): ProviderToolCall<ChatCompletionToolMessageParam> {
  const [tool, text] =
    toolCall.type === "function" ? [toolCall.function.name, toolCall.function.arguments] : [toolCall.custom.name, toolCall.custom.input];
  return {
    tool,
    arguments: text,
    callId: toolCall.id,
    toolError: (message) => ({ role: "tool", tool_call_id: toolCall.id, content: message }),
  };
}

// A Responses API `function_call` output item.
export function fromResponses(item: ResponseFunctionToolCall): ProviderToolCall<ResponseInputItem.FunctionCallOutput> {
  return {
    tool: item.name,
    arguments: item.arguments,
    callId: item.call_id,
    toolError: (message) => ({ type: "function_call_output", call_id: item.call_id, output: message }),
  };
}

export interface CheckedToolCall extends Gated {
  toolCall: ChatCompletionMessageToolCall;
  toolMessage?: ChatCompletionToolMessageParam; // for a refused call: append it to the messages; nothing ran
}

// Every tool call of a completion's first choice, checked in order, with the completion's own model name:
//
//   for (const checked of await checkChatCompletion(gateway, completion, { conversationId, customerId })) {
//     messages.push(checked.toolMessage ?? { role: "tool", tool_call_id: checked.toolCall.id, content: await run(checked.toolCall) });
//   }
export async function checkChatCompletion(
  client: GatewayClient,
  completion: ChatCompletion,
  context: CallContext = {},
): Promise<CheckedToolCall[]> {
  const checked: CheckedToolCall[] = [];
  // One after the other, in the model's order: the gateway judges a repeat, and closes a repair, by what
  // it saw earlier in the conversation.
  for (const toolCall of completion.choices[0]?.message.tool_calls ?? []) {
    const call = fromChatCompletion(toolCall);
    const answer = await gate(client, { ...context, ...call, model: context.model ?? completion.model });
    checked.push({
      ...answer,
      toolCall,
      toolMessage: answer.run ? undefined : call.toolError(answer.toolResult ?? ""),
    });
  }
  return checked;
}
