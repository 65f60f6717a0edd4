"""A protobuf Struct as plain Python values, read field by field (faster than json_format.MessageToDict)."""

from __future__ import annotations

from google.protobuf import struct_pb2


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, object]:
    """A Struct as plain Python values (docs/performance.md has what this saves over MessageToDict)."""
    return {key: _value(value) for key, value in struct.fields.items()}


def _value(value: struct_pb2.Value) -> object:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        return value.number_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return struct_to_dict(value.struct_value)
    if kind == "list_value":
        return [_value(item) for item in value.list_value.values]
    return None  # null_value, or no kind set
