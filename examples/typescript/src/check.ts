// Drives a running gateway through Validate, ValidateStream and Repair, and prints
// what came back as JSON lines, for tests/e2e/test_typescript_client.py to check.
//
//   node dist/check.js 127.0.0.1:50051
import { connect, gate, repair, validate, validateMany } from "./argwatch";

async function main(target: string): Promise<void> {
  const client = connect(target);
  const print = (step: string, value: unknown) => console.log(JSON.stringify({ step, value }));
  try {
    const clean = await validate(client, { tool: "refund_order", arguments: { reason_code: "DAMAGED_ITEM" } });
    print("validate_clean", { decision: clean.decision, problems: clean.problems.length, call_id: clean.call_id });

    const invented = await validate(client, {
      tool: "refund_order",
      arguments: { reason_code: "ITEM_DEFECTIVE" },
      callId: "ts-invented-1",
      conversationId: "ts-conversation",
    });
    print("validate_invented", {
      decision: invented.decision,
      call_id: invented.call_id,
      problems: invented.problems.map((p) => ({ code: p.code, argument: p.argument, shape: p.shape })),
    });

    const advice = await repair(client, invented.call_id);
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
    print("gate", gated);
  } finally {
    client.close();
  }
}

main(process.argv[2] ?? "127.0.0.1:50051").catch((error) => {
  console.error(error);
  process.exit(1);
});
