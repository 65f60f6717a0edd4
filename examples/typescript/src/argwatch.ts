// An agent-side argwatch client: check a tool call before it runs, and get the
// model-facing error when the gateway refuses it.
//
// The .proto files are loaded at run time with @grpc/proto-loader (the same
// files the gateway is built from, no protoc plugin); `npm run gen` writes
// TypeScript types for them with proto-loader-gen-types, so calls are typed.
import * as path from "path";
import { readFileSync } from "fs";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { ProtoGrpcType } from "./generated/gateway";
import type { GatewayClient } from "./generated/argwatch/v1/Gateway";
import type { ValidateResponse__Output } from "./generated/argwatch/v1/ValidateResponse";
import type { RepairResponse__Output } from "./generated/argwatch/v1/RepairResponse";
import type { ReportOutcomeResponse__Output } from "./generated/argwatch/v1/ReportOutcomeResponse";

const PROTO_ROOT = path.resolve(__dirname, "../../../proto");

// Deadlines and retries as published with the protos: 2 s per Validate, and
// retries on UNAVAILABLE only (a rejection is a verdict, never an error).
const SERVICE_CONFIG = readFileSync(path.join(PROTO_ROOT, "argwatch/v1/service_config.json"), "utf8");

// Who and what a call is made for: the same for every call of one conversation, so the framework gates
// (gates/, adapters/) take it once and add it to each call. The gateway counts repairs per conversation and
// tool, and keeps the model's name with each sampled offending value.
export interface CallContext {
  conversationId?: string;
  customerId?: string;
  tenant?: string;
  model?: string; // as the harness names it ("gpt-4.1-mini"); at most 128 characters
  promptVersion?: string; // the agent's prompt version ("support-v13"); at most 128 characters
}

export interface ToolCall extends CallContext {
  tool: string;
  // The model's raw argument text when the caller has it (sent byte for byte: the gateway parses it, and
  // reports text that is not a JSON object as a problem), else the arguments already parsed.
  arguments: Record<string, unknown> | string;
  callId?: string;
}

export function connect(target: string): GatewayClient {
  const definition = protoLoader.loadSync("argwatch/v1/gateway.proto", {
    includeDirs: [PROTO_ROOT],
    keepCase: true, // field names as in the .proto (call_id), as in every other language's docs
    longs: String,
    enums: String, // "DECISION_ALLOW", not 1
    defaults: true,
    oneofs: true,
  });
  const proto = grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType;
  return new proto.argwatch.v1.Gateway(target, grpc.credentials.createInsecure(), {
    "grpc.service_config": SERVICE_CONFIG,
  });
}

function request(call: ToolCall) {
  return {
    tool: call.tool,
    // JSON bytes: the gateway parses them itself (the fast path), so raw text goes as the model wrote it.
    arguments_json: Buffer.from(typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments)),
    call_id: call.callId ?? "",
    conversation_id: call.conversationId ?? "",
    session: { customer_id: call.customerId ?? "", tenant: call.tenant ?? "" },
    model: call.model ?? "",
    prompt_version: call.promptVersion ?? "",
  };
}

export function validate(client: GatewayClient, call: ToolCall): Promise<ValidateResponse__Output> {
  return new Promise((resolve, reject) => {
    client.Validate(request(call), (error, response) => (error || !response ? reject(error) : resolve(response)));
  });
}

// A call named again after its Validate: its id, with the conversation and session that Validate had. The
// gateway binds a call's records to them, so Repair and ReportOutcome from anywhere else get NOT_FOUND (a
// provider's "call_1", reused in another conversation, reaches only its own call).
export interface CallRef extends CallContext {
  callId: string;
}

function callRef(ref: CallRef) {
  return {
    call_id: ref.callId,
    conversation_id: ref.conversationId ?? "",
    session: { customer_id: ref.customerId ?? "", tenant: ref.tenant ?? "" },
  };
}

export function repair(client: GatewayClient, ref: CallRef): Promise<RepairResponse__Output> {
  return new Promise((resolve, reject) => {
    client.Repair(callRef(ref), (error, response) => (error || !response ? reject(error) : resolve(response)));
  });
}

// How a call of a tool with side effects went. A repeat after "OUTCOME_FAILED" is let through as a
// retry; after a success, or with the outcome unknown, the gateway refuses it (reject mode).
export type Outcome = "OUTCOME_SUCCEEDED" | "OUTCOME_FAILED" | "OUTCOME_UNKNOWN";

export function reportOutcome(
  client: GatewayClient,
  ref: CallRef,
  outcome: Outcome,
): Promise<ReportOutcomeResponse__Output> {
  return new Promise((resolve, reject) => {
    client.ReportOutcome({ ...callRef(ref), outcome }, (error, response) =>
      error || !response ? reject(error) : resolve(response),
    );
  });
}

// Many calls over one stream; answers are matched to calls by call_id (they may come in any order).
export function validateMany(client: GatewayClient, calls: ToolCall[]): Promise<Map<string, ValidateResponse__Output>> {
  return new Promise((resolve, reject) => {
    const answers = new Map<string, ValidateResponse__Output>();
    const stream = client.ValidateStream({ deadline: Date.now() + 10_000 });
    stream.on("data", (response: ValidateResponse__Output) => {
      answers.set(response.call_id, response);
      if (answers.size === calls.length) stream.end();
    });
    stream.on("error", reject);
    stream.on("end", () => resolve(answers));
    for (const call of calls) stream.write(request(call));
  });
}

export interface Gated {
  run: boolean; // run the tool (problems may still be listed: observe mode reports without refusing)
  toolResult?: string; // when not: Repair's message, to hand the model as the tool's result
  verdict: ValidateResponse__Output; // idempotency_key, repair_attempt, give_up, problems, ...
  repair?: RepairResponse__Output;
}

// What the agent does with a verdict: run the tool, or hand the model the gateway's repair message.
export async function gate(client: GatewayClient, call: ToolCall): Promise<Gated> {
  const verdict = await validate(client, call);
  if (verdict.decision !== "DECISION_REJECT") return { run: true, verdict };
  const advice = await repair(client, { ...call, callId: verdict.call_id });
  return { run: false, toolResult: advice.message, verdict, repair: advice };
}
