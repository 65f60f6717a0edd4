"""Modes: each tool's observe/reject mode, on-call overrides and their audit, on one replica or across the fleet."""
