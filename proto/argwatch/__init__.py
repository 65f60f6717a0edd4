"""argwatch: a gRPC gateway that checks LLM agents' tool-call arguments before the call runs."""
