"""Build hook: generates the argwatch.v1 Python stubs from proto/ before packaging, and builds the C extensions.

The stubs are written beside their .proto files (proto/argwatch/v1/x_pb2.py), the
path that is also their import path, and are never committed; both wheel and
editable installs run this step, so a clean clone always gets stubs that match
its protos.
"""

from __future__ import annotations

import glob
import os

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

PROTO_ROOT = "proto"


def generate_stubs() -> None:
    import grpc_tools  # build requirement, pinned in pyproject.toml
    from grpc_tools import protoc

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    sources = sorted(glob.glob(os.path.join(PROTO_ROOT, "argwatch", "v1", "*.proto")))
    if not sources:
        raise RuntimeError(f"no .proto files under {PROTO_ROOT}/argwatch/v1")
    relative = [os.path.relpath(s, PROTO_ROOT) for s in sources]
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={PROTO_ROOT}",
        f"--pyi_out={PROTO_ROOT}",
        f"--grpc_python_out={PROTO_ROOT}",
        *relative,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed: " + " ".join(args))


class BuildPyWithStubs(build_py):
    """build_py that generates the stubs first, so they are collected as modules."""

    def run(self) -> None:
        generate_stubs()
        super().run()


# The decision log's lines (server/decisions/_digest.c), the spans' OTLP bytes (server/tracing/_otlp.c), large
# value sets packed (server/sets/_packed.c), a ValidateRequest's fields read (server/edge/_request.c), the
# quick verdict's answers made from its bytes (server/edge/_answers.c) and the latency histogram's buckets
# (server/telemetry/_buckets.c) in C:
# they need a C compiler and Python's headers at install (docs/developing.md). -O2 and no more, nothing
# machine-specific (AVX2 is used only where the CPU says it has it, checked at import), so a wheel runs where it
# is copied.
_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra"]
NATIVE = [
    Extension(
        "argwatch.server.decisions._digest",
        ["server/decisions/_digest.c"],
        depends=["server/native/bytes.h"],
        extra_compile_args=_FLAGS,
    ),
    Extension(
        "argwatch.server.edge._request",
        ["server/edge/_request.c"],
        depends=["server/native/request_fields.h"],
        extra_compile_args=_FLAGS,
    ),
    Extension(
        "argwatch.server.edge._answers",
        ["server/edge/_answers.c"],
        depends=["server/native/request_fields.h", "server/native/json_bound.h", "server/native/buckets.h"],
        extra_compile_args=_FLAGS,
    ),
    Extension(
        "argwatch.server.telemetry._buckets",
        ["server/telemetry/_buckets.c"],
        depends=["server/native/buckets.h"],
        extra_compile_args=_FLAGS,
    ),
    Extension(
        "argwatch.server.sets._packed",
        ["server/sets/_packed.c"],
        extra_compile_args=_FLAGS,
    ),
    Extension(
        "argwatch.server.tracing._otlp",
        ["server/tracing/_otlp.c"],
        depends=["server/native/bytes.h"],
        extra_compile_args=_FLAGS,
    ),
]

setup(cmdclass={"build_py": BuildPyWithStubs}, ext_modules=NATIVE)
