// The argwatch gate for the Vercel AI SDK (`ai`): wraps each tool's `execute`, so every call is checked first.
//
//   const result = await generateText({
//     model,
//     tools: gateTools({ refund_order: refundOrder }, { gateway, conversationId, customerId, model }),
//     stopWhen: stepCountIs(5),
//     prompt,
//   });
//
// A call the gateway refuses never reaches the tool's own execute: the wrapper throws an ArgwatchRefusal
// whose message is Repair's, and the SDK hands exactly that text to the model as the call's result, marked
// as an error (`error-text`: is_error for Anthropic, the tool message's content for OpenAI), the way the
// MCP gate answers with isError. Throwing, rather than returning the message, keeps each tool's declared
// output type and its toModelOutput untouched (neither ever sees a refusal), and lets the harness tell a
// refusal from a result: a `tool-error` part in `steps[i].content` whose `error` is an ArgwatchRefusal.
//
// When no verdict is reached (the gateway unreachable after the service config's retries), the gRPC error
// is thrown as it is: the tool does not run, and the SDK hands the model that error's text. Failing closed
// is the safe default for a gate in front of tools with side effects.
//
// The SDK parses the model's input with the tool's inputSchema before execute, so the gateway sees the
// arguments as parsed: give bound arguments a plain z.string() (a z.enum would refuse an invented value
// itself, without the repair message, and uncounted), and note that z.object drops keys the schema does not
// name (z.looseObject keeps them, for the gateway to report as unexpected arguments).
//
// `ai` is a plain dependency of this example package; a published package would make it (and zod) an
// optional peer dependency, so an agent that never imports this file never installs the SDK.
import { randomUUID } from "node:crypto";
import type { Tool, ToolExecutionOptions, ToolSet } from "ai";
import { gate, type CallContext } from "../argwatch";
import type { GatewayClient } from "../generated/argwatch/v1/Gateway";
import type { ValidateResponse__Output } from "../generated/argwatch/v1/ValidateResponse";

export interface GateOptions extends Omit<CallContext, "model"> {
  gateway: GatewayClient;
  conversationId: string; // repairs are tracked per conversation and tool: one id per agent run or thread
  // The model, by name or as the LanguageModel given to generateText (its modelId is read): the tool's
  // execute is never told which model wrote the call.
  model?: string | { readonly modelId: string };
}

// A call the gateway refused: nothing ran. `message` is what the model reads.
export class ArgwatchRefusal extends Error {
  override readonly name = "ArgwatchRefusal";
  readonly executed = false;

  constructor(
    message: string,
    readonly tool: string,
    readonly callId: string,
    readonly attempt: number, // which rejected attempt this is in the conversation, for this tool
    readonly giveUp: boolean, // retrying is pointless: stop the run and tell the user
    readonly verdict: ValidateResponse__Output,
  ) {
    super(message);
  }
}

// The gateway keeps a rejection under its call id, and a provider's ids are unique only within one
// conversation (scripted and open-weight models write "call_1" in every one): two conversations sharing
// an id would read each other's repair message. The provider's id stays in front, for the sampled log.
function ownCallId(toolCallId: string): string {
  return `${toolCallId.slice(0, 100)}~${randomUUID().replace(/-/g, "").slice(0, 16)}`;
}

function modelName(model: GateOptions["model"]): string {
  return typeof model === "string" ? model : (model?.modelId ?? "");
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return value != null && typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function";
}

// One tool, under the name the model calls it by (a ToolSet's key). A tool without execute is returned as
// it is: the SDK does not run it, so whoever does must check it.
export function gated<T extends Tool>(name: string, tool: T, options: GateOptions): T {
  const original = tool.execute;
  if (original === undefined) return tool;
  const context: CallContext = {
    conversationId: options.conversationId,
    customerId: options.customerId,
    tenant: options.tenant,
    model: modelName(options.model),
    promptVersion: options.promptVersion,
  };
  const check = async (input: unknown, execution: ToolExecutionOptions): Promise<void> => {
    const answer = await gate(options.gateway, {
      ...context,
      tool: name,
      arguments: JSON.stringify(input ?? {}),
      callId: ownCallId(execution.toolCallId),
    });
    if (!answer.run) {
      const repair = answer.repair;
      throw new ArgwatchRefusal(
        answer.toolResult ?? "",
        name,
        answer.verdict.call_id,
        repair?.attempt ?? answer.verdict.repair_attempt,
        repair?.give_up ?? answer.verdict.give_up,
        answer.verdict,
      );
    }
  };
  // A streaming tool (an async generator: preliminary results) stays one, so its previews still stream.
  const streams = Object.prototype.toString.call(original) === "[object AsyncGeneratorFunction]";
  const execute = streams
    ? async function* (input: unknown, execution: ToolExecutionOptions) {
        await check(input, execution);
        yield* original.call(tool, input as never, execution) as AsyncIterable<unknown>;
      }
    : async (input: unknown, execution: ToolExecutionOptions) => {
        await check(input, execution);
        const output: unknown = await original.call(tool, input as never, execution);
        if (!isAsyncIterable(output)) return output;
        // A plain function that returned an iterable: its last value is the result, as the SDK would take it.
        let last: unknown;
        for await (const part of output) last = part;
        return last;
      };
  return { ...tool, execute } as T;
}

// Every tool of a ToolSet, each checked under its key: the one line to change in a generateText or
// streamText call. The types are the ToolSet's own, so typed tool results stay typed.
export function gateTools<TOOLS extends ToolSet>(tools: TOOLS, options: GateOptions): TOOLS {
  return Object.fromEntries(
    Object.entries(tools).map(([name, tool]) => [name, gated(name, tool as Tool, options)]),
  ) as TOOLS;
}

// For stopWhen: end the run once the gateway says retrying is pointless (the model repeated the same
// invalid call, or spent the conversation's repair budget). The model was told to stop and tell the user.
export function gaveUp({ steps }: { steps: ReadonlyArray<{ content: ReadonlyArray<{ type: string; error?: unknown }> }> }): boolean {
  const last = steps[steps.length - 1];
  return (last?.content ?? []).some(
    (part) => part.type === "tool-error" && part.error instanceof ArgwatchRefusal && part.error.giveUp,
  );
}
