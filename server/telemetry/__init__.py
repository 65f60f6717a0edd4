"""Telemetry: Prometheus metrics, the sampled log of offending values, and the Admin API's windows and reports."""
