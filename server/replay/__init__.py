"""Replaying recorded tool calls offline through the gateway's own verdict code (`argwatch replay`, `sets export`)."""
