"""The policy: its immutable model, the YAML loader, CEL rule compilation, and tool definitions in and out."""
