// Drives a running gateway through Validate, ValidateStream and Repair (or, with
// "side-effects", a refund's repeat and ReportOutcome), and prints what came back
// as JSON lines, for tests/e2e/test_typescript_client.py to check.
//
//   node dist/check.js 127.0.0.1:50051 [side-effects]
import { connect, gate, repair, reportOutcome, validate, validateMany } from "./argwatch";

const print = (step: string, value: unknown) => console.log(JSON.stringify({ step, value }));

// A refund with side effects: the idempotency key, a repeat refused, a reported failure, a retry let through.
async function sideEffects(target: string): Promise<void> {
  const client = connect(target);
  const refund = { tool: "refund_order", arguments: { order_id: "ord_1", amount_cents: 1200 }, conversationId: "ts-c" };
  try {
    const first = await validate(client, { ...refund, callId: "ts-refund-1" });
    print("first", { decision: first.decision, key: first.idempotency_key, check: first.repeat_check });
    const again = await validate(client, { ...refund, callId: "ts-refund-2" });
    print("repeat", {
      decision: again.decision,
      key: again.idempotency_key,
      earlier: again.repeat_of?.call_id,
      problems: again.problems.map((p) => p.code),
      message: (await repair(client, { ...refund, callId: again.call_id })).message,
    });
    const reported = await reportOutcome(client, { ...refund, callId: first.call_id }, "OUTCOME_FAILED");
    print("reported", { outcome: reported.outcome, key: reported.idempotency_key });
    const retry = await validate(client, { ...refund, callId: "ts-refund-3" });
    print("retry", { decision: retry.decision, retry_allowed: retry.repeat_of?.retry_allowed });
  } finally {
    client.close();
  }
}

async function main(target: string): Promise<void> {
  const client = connect(target);
  try {
    const clean = await validate(client, { tool: "refund_order", arguments: { reason_code: "DAMAGED_ITEM" } });
    print("validate_clean", { decision: clean.decision, problems: clean.problems.length, call_id: clean.call_id });

    const conversation = { conversationId: "ts-conversation", customerId: "cus_ts" };
    const invented = await validate(client, {
      tool: "refund_order",
      arguments: { reason_code: "ITEM_DEFECTIVE" },
      callId: "ts-invented-1",
      ...conversation,
    });
    print("validate_invented", {
      decision: invented.decision,
      call_id: invented.call_id,
      problems: invented.problems.map((p) => ({ code: p.code, argument: p.argument, shape: p.shape })),
    });

    const advice = await repair(client, { ...conversation, callId: invented.call_id });
    print("repair", { executed: advice.executed, message: advice.message, legal: advice.legal_values.map((l) => l.values) });

    const answers = await validateMany(client, [
      { tool: "refund_order", arguments: { reason_code: "DAMAGED_ITEM" }, callId: "s1" },
      { tool: "refund_order", arguments: { reason_code: "damaged item" }, callId: "s2" },
      { tool: "no_such_tool", arguments: {}, callId: "s3" },
    ]);
    print(
      "validate_stream",
      Object.fromEntries([...answers].map(([id, r]) => [id, { decision: r.decision, problems: r.problems.map((p) => p.code) }])),
    );

    const gated = await gate(client, { tool: "refund_order", arguments: { reason_code: "LOST" }, callId: "ts-gate-1" });
    print("gate", { run: gated.run, toolResult: gated.toolResult });
  } finally {
    client.close();
  }
}

const target = process.argv[2] ?? "127.0.0.1:50051";
(process.argv[3] === "side-effects" ? sideEffects(target) : main(target)).catch((error) => {
  console.error(error);
  process.exit(1);
});
