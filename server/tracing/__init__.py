"""OpenTelemetry for the gateway (argwatch[otel]): spans of the Gateway's calls, the decision log as OTLP logs.

Imported only with `serve --otlp-endpoint`: without it nothing of OpenTelemetry
is loaded, and no call pays for a span or a branch.
"""
