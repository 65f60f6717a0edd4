// Runs the framework gates offline against a running gateway and prints what happened as JSON lines, for
// tests/e2e/test_typescript_gates.py to check:
//
//   node dist/gates-check.js 127.0.0.1:50051 vercel-ai   # the AI SDK's generateText, a scripted model, a gated tool
//   node dist/gates-check.js 127.0.0.1:50051 openai      # the OpenAI SDK's objects, from recorded responses
import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import type {
  ChatCompletionMessageToolCall,
  ChatCompletionMessageParam,
  ChatCompletionToolMessageParam,
} from "openai/resources/chat/completions";
import type { ResponseFunctionToolCall, ResponseInputItem } from "openai/resources/responses/responses";
import { z } from "zod";
import { connect, gate } from "./argwatch";
import { checkChatCompletion, fromChatCompletion, fromResponses } from "./adapters/openai";
import { ArgwatchRefusal, gateTools, gaveUp } from "./gates/vercel-ai";
import { chatCompletion, responsesOutput } from "./recorded/openai";

const print = (step: string, value: unknown) => console.log(JSON.stringify({ step, value }));

// One scripted answer of the model: what MockLanguageModelV3's doGenerate returns.
type ModelAnswer = Awaited<ReturnType<MockLanguageModelV3["doGenerate"]>>;

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

function callsRefund(toolCallId: string, reasonCode: string): ModelAnswer {
  const input = JSON.stringify({ order_id: "ord_0012345678", reason_code: reasonCode, amount_cents: 1200 });
  return {
    content: [{ type: "tool-call", toolCallId, toolName: "refund_order", input }],
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
    usage,
    warnings: [],
  };
}

// The Vercel AI SDK: its own generateText loop, its scripted model and a tool made with its tool() helper.
async function vercelAi(target: string): Promise<void> {
  const gateway = connect(target);
  const ran: Array<{ input: unknown; toolCallId: string }> = [];
  const refundOrder = tool({
    description: "Refund an order.",
    // reason_code is a plain string: its legal values are the refunds service's, checked live by the gateway.
    inputSchema: z.object({ order_id: z.string(), reason_code: z.string(), amount_cents: z.number().int() }),
    execute: async (input, { toolCallId }) => {
      ran.push({ input, toolCallId });
      return { refund_id: "rf_0001", status: "refunded" };
    },
  });
  // Step 1 invents a reason code; step 2, once it has the tool's answer, sends a legal one; step 3 answers.
  const model = new MockLanguageModelV3({
    provider: "scripted",
    modelId: "scripted-refunds-1",
    doGenerate: [
      callsRefund("call-invented", "ITEM_DEFECTIVE"),
      callsRefund("call-corrected", "DAMAGED_ITEM"),
      {
        content: [{ type: "text", text: "The refund is on its way." }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      },
    ],
  });
  try {
    const result = await generateText({
      model,
      // The one line: the model object is passed too, so the gateway records which model wrote each call.
      tools: gateTools({ refund_order: refundOrder }, { gateway, conversationId: "ts-vercel-1", customerId: "cus_7", model }),
      stopWhen: [stepCountIs(5), gaveUp],
      prompt: "Refund order ord_0012345678: the mug arrived broken.",
    });
    // What the model was sent back for each of its calls, from the prompt it received on its next step.
    const toolResults = model.doGenerateCalls.map((call) =>
      call.prompt.flatMap((message) =>
        message.role === "tool"
          ? message.content.flatMap((part) => (part.type === "tool-result" ? [{ toolCallId: part.toolCallId, output: part.output }] : []))
          : [],
      ),
    );
    const refusals = result.steps.flatMap((step) =>
      step.content.flatMap((part) =>
        part.type === "tool-error" && part.error instanceof ArgwatchRefusal
          ? [{ toolCallId: part.toolCallId, callId: part.error.callId, attempt: part.error.attempt, giveUp: part.error.giveUp, executed: part.error.executed }]
          : [],
      ),
    );
    print("vercel_ai", {
      ran,
      model_calls: model.doGenerateCalls.length,
      steps: result.steps.map((step) => step.finishReason),
      text: result.text,
      tool_results_seen_by_model: toolResults,
      refusals,
      tool_results: result.steps.flatMap((step) => step.toolResults.map((r) => ({ toolCallId: r.toolCallId, output: r.output }))),
    });
  } finally {
    gateway.close();
  }
}

// Compile-time checks: the adapters take the OpenAI SDK's own tool-call types and return its own param
// types, exactly (a wider or narrower signature fails the build).
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const typeChecks: [
  Same<Parameters<typeof fromChatCompletion>[0], ChatCompletionMessageToolCall>,
  Same<ReturnType<ReturnType<typeof fromChatCompletion>["toolError"]>, ChatCompletionToolMessageParam>,
  Same<Parameters<typeof fromResponses>[0], ResponseFunctionToolCall>,
  Same<ReturnType<ReturnType<typeof fromResponses>["toolError"]>, ResponseInputItem.FunctionCallOutput>,
] = [true, true, true, true];

// The OpenAI Node SDK's objects, from recorded responses: the loop an agent runs over a ChatCompletion.
async function openai(target: string): Promise<void> {
  const gateway = connect(target);
  const ran: string[] = [];
  try {
    const message = chatCompletion.choices[0]!.message;
    const messages: ChatCompletionMessageParam[] = [message];
    const checked = await checkChatCompletion(gateway, chatCompletion, { conversationId: "ts-openai-1", customerId: "cus_7" });
    for (const { toolCall, toolMessage } of checked) {
      if (toolMessage) {
        messages.push(toolMessage); // refused: the model reads why, and nothing ran
      } else {
        ran.push(toolCall.id);
        messages.push({ role: "tool", tool_call_id: toolCall.id, content: JSON.stringify({ status: "refunded" }) });
      }
    }
    print("openai_chat", {
      type_checks: typeChecks,
      ran,
      decisions: checked.map((c) => ({ id: c.toolCall.id, run: c.run, call_id: c.verdict.call_id })),
      messages: messages.slice(1),
    });

    // The Responses API: each function_call output item, answered with a function_call_output item.
    const input: ResponseInputItem[] = [];
    for (const item of responsesOutput) {
      if (item.type !== "function_call") continue;
      const call = fromResponses(item);
      const answer = await gate(gateway, { ...call, conversationId: "ts-openai-2", model: "gpt-4.1-mini" });
      input.push(answer.run ? { type: "function_call_output", call_id: item.call_id, output: "refunded" } : call.toolError(answer.toolResult ?? ""));
    }
    print("openai_responses", { input });
  } finally {
    gateway.close();
  }
}

const [target = "127.0.0.1:50051", mode = "vercel-ai"] = process.argv.slice(2);
(mode === "openai" ? openai(target) : vercelAi(target)).catch((error) => {
  console.error(error);
  process.exit(1);
});
