"""The process: building the gateway, its settings, TLS, worker processes and background-task lifecycle."""
