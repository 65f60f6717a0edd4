// An agent-side argwatch client in Java: Validate, Repair, ValidateStream; prints JSON lines.
//
//   java -jar examples/java/build/check.jar 127.0.0.1:50051 [proto/argwatch/v1/service_config.json]
//
// tests/e2e/test_go_java_clients.py runs it and checks every line; any error exits non-zero, so a
// broken stub or a refused RPC fails that test.

import argwatch.v1.GatewayGrpc;
import argwatch.v1.GatewayOuterClass.Problem;
import argwatch.v1.GatewayOuterClass.RepairRequest;
import argwatch.v1.GatewayOuterClass.RepairResponse;
import argwatch.v1.GatewayOuterClass.Session;
import argwatch.v1.GatewayOuterClass.ValidateRequest;
import argwatch.v1.GatewayOuterClass.ValidateResponse;
import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.protobuf.ByteString;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

public final class Check {
  // A verdict takes the gateway about a millisecond; 2 s (as service_config.json says for the
  // unary calls) is how long the agent waits before it gives up on one.
  private static final long DEADLINE_SECONDS = 2;

  // Who the calls are made for: the harness knows these, never the model.
  private static final String CONVERSATION_ID = "java-conversation";
  private static final String CUSTOMER_ID = "cus_java";
  private static final String MODEL = "gpt-4.1-mini";

  // Arguments as the model wrote them: JSON text, sent as bytes for the gateway to parse.
  private static final String CLEAN = "{\"reason_code\": \"DAMAGED_ITEM\"}";
  private static final String INVENTED = "{\"reason_code\": \"ITEM_DEFECTIVE\"}";
  private static final String SLIP = "{\"reason_code\": \"damaged item\"}";

  private Check() {}

  private static void emit(String step, JsonElement value) {
    JsonObject line = new JsonObject();
    line.addProperty("step", step);
    line.add("value", value);
    System.out.println(line);
  }

  // One tool call as the harness would send it.
  private static ValidateRequest request(String tool, String arguments, String callId) {
    return ValidateRequest.newBuilder()
        .setTool(tool)
        .setArgumentsJson(ByteString.copyFromUtf8(arguments))
        .setConversationId(CONVERSATION_ID)
        .setCallId(callId)
        .setSession(Session.newBuilder().setCustomerId(CUSTOMER_ID))
        .setModel(MODEL)
        .build();
  }

  // A fresh stub per call: withDeadlineAfter fixes the deadline when the stub is made.
  private static GatewayGrpc.GatewayBlockingStub blocking(ManagedChannel channel) {
    return GatewayGrpc.newBlockingStub(channel)
        .withDeadlineAfter(DEADLINE_SECONDS, TimeUnit.SECONDS);
  }

  private static JsonArray codes(List<Problem> problems) {
    JsonArray names = new JsonArray();
    problems.forEach(problem -> names.add(problem.getCode().name()));
    return names;
  }

  // Sends every call on one ValidateStream and returns the verdicts by call_id: the gateway may
  // answer in any order, so nothing relies on it.
  private static Map<String, ValidateResponse> validateMany(
      ManagedChannel channel, List<ValidateRequest> calls) throws Exception {
    Map<String, ValidateResponse> verdicts = new ConcurrentHashMap<>();
    CompletableFuture<Void> done = new CompletableFuture<>();
    StreamObserver<ValidateRequest> requests =
        GatewayGrpc.newStub(channel)
            .withDeadlineAfter(DEADLINE_SECONDS, TimeUnit.SECONDS)
            .validateStream(
                new StreamObserver<ValidateResponse>() {
                  @Override
                  public void onNext(ValidateResponse verdict) {
                    verdicts.put(verdict.getCallId(), verdict);
                  }

                  @Override
                  public void onError(Throwable error) {
                    done.completeExceptionally(error);
                  }

                  @Override
                  public void onCompleted() {
                    done.complete(null);
                  }
                });
    calls.forEach(requests::onNext);
    requests.onCompleted();
    // The RPC's own deadline ends the stream; this wait only guards against a bug in the observer.
    done.get(2 * DEADLINE_SECONDS, TimeUnit.SECONDS);
    if (verdicts.size() != calls.size()) {
      throw new IllegalStateException(verdicts.size() + " verdicts for " + calls.size() + " calls");
    }
    return verdicts;
  }

  private static void run(ManagedChannel channel) throws Exception {
    ValidateResponse clean = blocking(channel).validate(request("refund_order", CLEAN, ""));
    JsonObject cleanSeen = new JsonObject();
    cleanSeen.addProperty("decision", clean.getDecision().name());
    cleanSeen.addProperty("problems", clean.getProblemsCount());
    cleanSeen.addProperty("call_id", clean.getCallId());
    emit("validate_clean", cleanSeen);

    ValidateResponse invented =
        blocking(channel).validate(request("refund_order", INVENTED, "java-invented-1"));
    JsonArray problems = new JsonArray();
    for (Problem problem : invented.getProblemsList()) {
      JsonObject seen = new JsonObject();
      seen.addProperty("code", problem.getCode().name());
      seen.addProperty("argument", problem.getArgument());
      seen.addProperty("shape", problem.getShape().name());
      problems.add(seen);
    }
    JsonObject inventedSeen = new JsonObject();
    inventedSeen.addProperty("decision", invented.getDecision().name());
    inventedSeen.addProperty("call_id", invented.getCallId());
    inventedSeen.add("problems", problems);
    emit("validate_invented", inventedSeen);

    // Repair finds a rejected call only with the conversation and session its Validate had.
    RepairRequest which =
        RepairRequest.newBuilder()
            .setCallId(invented.getCallId())
            .setConversationId(CONVERSATION_ID)
            .setSession(Session.newBuilder().setCustomerId(CUSTOMER_ID))
            .build();
    RepairResponse advice = blocking(channel).repair(which);
    JsonArray legal = new JsonArray();
    Gson gson = new Gson();
    advice.getLegalValuesList().forEach(set -> legal.add(gson.toJsonTree(set.getValuesList())));
    JsonObject adviceSeen = new JsonObject();
    adviceSeen.addProperty("executed", advice.getExecuted());
    adviceSeen.addProperty("message", advice.getMessage());
    adviceSeen.add("legal", legal);
    emit("repair", adviceSeen);

    Map<String, ValidateResponse> answers =
        validateMany(
            channel,
            List.of(
                request("refund_order", CLEAN, "java-s1"),
                request("refund_order", SLIP, "java-s2"),
                request("no_such_tool", "{}", "java-s3")));
    JsonObject stream = new JsonObject();
    answers.forEach(
        (id, verdict) -> {
          JsonObject seen = new JsonObject();
          seen.addProperty("decision", verdict.getDecision().name());
          seen.add("problems", codes(verdict.getProblemsList()));
          stream.add(id, seen);
        });
    emit("validate_stream", stream);
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: java -jar check.jar ADDRESS [SERVICE_CONFIG]");
      System.exit(2);
    }
    Path configPath = Path.of(args.length > 1 ? args[1] : "proto/argwatch/v1/service_config.json");
    // The published service config: per-method timeouts and retries on UNAVAILABLE only. Gson
    // reads numbers as Double, the type grpc-java expects in a service config map.
    @SuppressWarnings("unchecked")
    Map<String, ?> config =
        new Gson().fromJson(Files.readString(configPath, StandardCharsets.UTF_8), Map.class);
    ManagedChannel channel =
        ManagedChannelBuilder.forTarget(args[0])
            .usePlaintext() // the gateway listens in plaintext on loopback here
            .defaultServiceConfig(config)
            .enableRetry()
            .build();
    try {
      run(channel);
    } finally {
      channel.shutdownNow().awaitTermination(DEADLINE_SECONDS, TimeUnit.SECONDS);
    }
  }
}
