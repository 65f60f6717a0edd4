// Command check is an argwatch client in Go: Validate, Repair, ValidateStream; prints JSON lines.
//
//	examples/go/build/check 127.0.0.1:50051 [proto/argwatch/v1/service_config.json]
//
// tests/e2e/test_go_java_clients.py runs it and checks every line; any error
// exits non-zero, so a broken stub or a refused RPC fails that test.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"

	pb "example.com/agent/argwatchv1"
)

// A verdict takes the gateway about a millisecond; 2 s (as service_config.json
// says for the unary calls) is how long the agent waits before it gives up on one.
const deadline = 2 * time.Second

// Who the calls are made for: the harness knows these, never the model.
const (
	conversationID = "go-conversation"
	customerID     = "cus_go"
	model          = "gpt-4.1-mini"
)

// Arguments as the model wrote them: JSON text, sent as bytes for the gateway to parse.
const (
	clean    = `{"reason_code": "DAMAGED_ITEM"}`
	invented = `{"reason_code": "ITEM_DEFECTIVE"}`
	slip     = `{"reason_code": "damaged item"}`
)

func emit(step string, value any) {
	line, err := json.Marshal(map[string]any{"step": step, "value": value})
	if err != nil {
		fail("encoding %s: %v", step, err)
	}
	fmt.Println(string(line))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "check: "+format+"\n", args...)
	os.Exit(1)
}

// request builds one tool call as the harness would send it.
func request(tool, arguments, callID string) *pb.ValidateRequest {
	return &pb.ValidateRequest{
		Tool:           tool,
		Arguments:      &pb.ValidateRequest_ArgumentsJson{ArgumentsJson: []byte(arguments)},
		ConversationId: conversationID,
		CallId:         callID,
		Session:        &pb.Session{CustomerId: customerID},
		Model:          model,
	}
}

func codes(problems []*pb.Problem) []string {
	names := []string{} // [] rather than null in the JSON when there are none
	for _, problem := range problems {
		names = append(names, problem.Code.String())
	}
	return names
}

func validate(client pb.GatewayClient, call *pb.ValidateRequest) *pb.ValidateResponse {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	verdict, err := client.Validate(ctx, call)
	if err != nil {
		fail("Validate %s: %v", call.CallId, err)
	}
	return verdict
}

// validateMany sends every call on one ValidateStream and returns the verdicts
// by call_id: the gateway may answer in any order, so nothing relies on it.
func validateMany(client pb.GatewayClient, calls []*pb.ValidateRequest) map[string]*pb.ValidateResponse {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	stream, err := client.ValidateStream(ctx)
	if err != nil {
		fail("ValidateStream: %v", err)
	}
	// Send from another goroutine while this one reads, so that a long batch
	// never stalls on flow control with unread responses.
	sent := make(chan error, 1)
	go func() {
		for _, call := range calls {
			if err := stream.Send(call); err != nil {
				sent <- err
				return
			}
		}
		sent <- stream.CloseSend()
	}()
	verdicts := map[string]*pb.ValidateResponse{}
	for {
		verdict, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail("ValidateStream: %v", err)
		}
		verdicts[verdict.CallId] = verdict
	}
	if err := <-sent; err != nil {
		fail("ValidateStream send: %v", err)
	}
	if len(verdicts) != len(calls) {
		fail("ValidateStream: %d verdicts for %d calls", len(verdicts), len(calls))
	}
	return verdicts
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: check ADDRESS [SERVICE_CONFIG]")
	}
	configPath := "proto/argwatch/v1/service_config.json"
	if len(os.Args) > 2 {
		configPath = os.Args[2]
	}
	// The published service config: its retry policy (UNAVAILABLE only) and
	// per-method timeouts. grpc-go 1.33 applies retries only with
	// GRPC_GO_RETRY=on; the deadlines below hold either way.
	config, err := os.ReadFile(configPath)
	if err != nil {
		fail("service config: %v", err)
	}
	// WithInsecure: the gateway listens in plaintext on loopback here; newer
	// grpc-go spells it WithTransportCredentials(insecure.NewCredentials()).
	conn, err := grpc.Dial(os.Args[1], grpc.WithInsecure(), grpc.WithDefaultServiceConfig(string(config)))
	if err != nil {
		fail("dial %s: %v", os.Args[1], err)
	}
	defer conn.Close()
	client := pb.NewGatewayClient(conn)

	allowed := validate(client, request("refund_order", clean, ""))
	emit("validate_clean", map[string]any{
		"decision": allowed.Decision.String(), "problems": len(allowed.Problems), "call_id": allowed.CallId,
	})

	rejected := validate(client, request("refund_order", invented, "go-invented-1"))
	problems := []map[string]string{}
	for _, problem := range rejected.Problems {
		problems = append(problems, map[string]string{
			"code": problem.Code.String(), "argument": problem.Argument, "shape": problem.Shape.String(),
		})
	}
	emit("validate_invented", map[string]any{
		"decision": rejected.Decision.String(), "call_id": rejected.CallId, "problems": problems,
	})

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	// Repair finds a rejected call only with the conversation and session its Validate had.
	advice, err := client.Repair(ctx, &pb.RepairRequest{
		CallId: rejected.CallId, ConversationId: conversationID, Session: &pb.Session{CustomerId: customerID},
	})
	cancel()
	if err != nil {
		fail("Repair %s: %v", rejected.CallId, err)
	}
	legal := [][]string{}
	for _, values := range advice.LegalValues {
		legal = append(legal, values.Values)
	}
	emit("repair", map[string]any{"executed": advice.Executed, "message": advice.Message, "legal": legal})

	answers := validateMany(client, []*pb.ValidateRequest{
		request("refund_order", clean, "go-s1"),
		request("refund_order", slip, "go-s2"),
		request("no_such_tool", `{}`, "go-s3"),
	})
	stream := map[string]any{}
	for id, verdict := range answers {
		stream[id] = map[string]any{"decision": verdict.Decision.String(), "problems": codes(verdict.Problems)}
	}
	emit("validate_stream", stream)
}
