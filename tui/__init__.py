"""The operator's side: clients of the Admin API (a live status line now; the Textual TUI builds on it)."""
