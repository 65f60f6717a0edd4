"""The operator's side, over the Admin API only: the Textual TUI (argwatch tui, the tui extra), and
`argwatch watch` and `argwatch report`, which need no Textual."""
