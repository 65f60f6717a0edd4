"""Recorded tool calls, read from transcripts and logs as the providers and MCP write them, one JSON document a line.

Each line is recognised by its shape, so one file may mix them:
- OpenAI Chat Completions: an API response ({"object": "chat.completion", "choices": [...]}), an
  assistant message with `tool_calls`, or a transcript ({"messages": [...]}) of such messages;
- OpenAI Responses: an API response ({"object": "response", "output": [...]}), a `function_call`
  item, or a transcript ({"input": [...]}) of items;
- Anthropic Messages: a Message ({"type": "message", "content": [...]}) or a transcript
  ({"messages": [...]}) whose assistant turns hold `tool_use` blocks;
- MCP: a `tools/call` JSON-RPC request;
- plain: {"tool": ..., "arguments": {...} or "<JSON text>"}, optionally with "model",
  "prompt_version", "conversation_id".
A line that is not JSON, or JSON of no known shape, is counted as malformed with its reason, and
reading goes on. Files ending in .gz (or starting with gzip's magic bytes) are read through gzip.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

MAX_LINE_BYTES = 16 << 20  # one transcript line; a longer one is malformed, never held whole


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One tool call as recorded: the arguments as the model wrote them (JSON text)."""

    tool: str
    arguments_json: bytes
    conversation_id: str = ""
    model: str = ""
    prompt_version: str = ""


@dataclass
class ReadCounts:
    """What reading the corpus met, line by line."""

    files: int = 0
    lines: int = 0
    lines_with_calls: int = 0
    lines_without_calls: int = 0  # a known shape with no tool call in it (a user turn, a text answer)
    malformed: Counter[str] = field(default_factory=Counter)  # reason -> lines


def read_corpus(paths: list[str], counts: ReadCounts, progress: Any = None) -> Iterator[RecordedCall]:
    """Every tool call in `paths`, in order; `counts` is updated as lines are read. `progress(done, total)`
    is told the bytes read so far of all the files (compressed bytes for a gzip file)."""
    total = sum(os.path.getsize(path) for path in paths)
    done_before = 0
    for path in paths:
        counts.files += 1
        with open(path, "rb") as raw:
            stream: IO[bytes] = gzip.GzipFile(fileobj=raw) if _gzipped(path, raw) else raw  # type: ignore[assignment]
            for number, line in enumerate(stream, start=1):
                counts.lines += 1
                if progress is not None and number % 1000 == 0:
                    progress(done_before + raw.tell(), total)
                found = list(_calls_of_line(line, counts, f"{path}:{number}"))
                if found:
                    counts.lines_with_calls += 1
                    yield from found
        done_before += os.path.getsize(path)
    if progress is not None:
        progress(total, total)


def _gzipped(path: str, raw: IO[bytes]) -> bool:
    magic = raw.read(2)
    raw.seek(0)
    return path.endswith(".gz") or magic == b"\x1f\x8b"


def _calls_of_line(line: bytes, counts: ReadCounts, where: str) -> Iterator[RecordedCall]:
    if not line.strip():
        return
    if len(line) > MAX_LINE_BYTES:
        counts.malformed["line longer than 16 MiB"] += 1
        return
    try:
        document = orjson.loads(line)
    except orjson.JSONDecodeError:
        counts.malformed["not JSON"] += 1
        return
    try:
        calls = list(calls_in(document))
    except _Unrecognised as why:
        counts.malformed[str(why)] += 1
        return
    if not calls:
        counts.lines_without_calls += 1
    yield from calls


class _Unrecognised(ValueError):
    """A JSON line of no shape this reader knows (its message is the reason, counted)."""


def calls_in(document: object) -> Iterator[RecordedCall]:
    """The tool calls of one recorded document; raises _Unrecognised for a shape it does not know."""
    if not isinstance(document, dict):
        raise _Unrecognised("not a JSON object")
    model = _text(document.get("model"))
    conversation = _text(document.get("conversation_id"))
    prompt_version = _text(document.get("prompt_version"))
    if "tool" in document and "arguments" in document:  # plain
        yield _call(document["tool"], document["arguments"], conversation, model, prompt_version)
    elif document.get("method") == "tools/call" or (document.get("jsonrpc") and "params" in document):
        params = document.get("params")
        if document.get("method") != "tools/call" or not isinstance(params, dict):
            return  # another JSON-RPC message of the session (initialize, tools/list, a result)
        yield _call(params.get("name"), params.get("arguments", {}), conversation, model, prompt_version)
    elif document.get("object") == "chat.completion":
        for choice in document.get("choices") or []:
            if isinstance(choice, dict):
                yield from _chat_message(choice.get("message"), conversation, model, prompt_version)
    elif document.get("object") == "response":
        yield from _responses_items(document.get("output"), conversation, model, prompt_version)
    elif document.get("type") == "message" or document.get("role") == "assistant":
        yield from _assistant_turn(document, conversation, model, prompt_version)
    elif document.get("type") == "function_call":
        yield from _responses_items([document], conversation, model, prompt_version)
    elif isinstance(document.get("role"), str):
        return  # a user, system or tool turn: a message of the transcript with no call in it
    elif isinstance(document.get("messages"), list):  # a Chat Completions or Anthropic transcript
        for message in document["messages"]:
            if isinstance(message, dict) and message.get("role") == "assistant":
                yield from _assistant_turn(message, conversation, model, prompt_version)
    elif isinstance(document.get("input"), list):  # a Responses transcript
        yield from _responses_items(document["input"], conversation, model, prompt_version)
    else:
        raise _Unrecognised("JSON of no known transcript shape")


def _assistant_turn(message: dict[str, Any], conversation: str, model: str, prompt: str) -> Iterator[RecordedCall]:
    """An assistant turn: Chat Completions (`tool_calls`) or Anthropic (`tool_use` blocks in `content`)."""
    yield from _chat_message(message, conversation, model, prompt)
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                yield _call(block.get("name"), block.get("input", {}), conversation, model, prompt)


def _chat_message(message: object, conversation: str, model: str, prompt: str) -> Iterator[RecordedCall]:
    if not isinstance(message, dict):
        return
    for tool_call in message.get("tool_calls") or []:
        function = tool_call.get("function") if isinstance(tool_call, dict) else None
        if isinstance(function, dict):
            yield _call(function.get("name"), function.get("arguments", ""), conversation, model, prompt)


def _responses_items(items: object, conversation: str, model: str, prompt: str) -> Iterator[RecordedCall]:
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call":
            yield _call(item.get("name"), item.get("arguments", ""), conversation, model, prompt)


def _call(tool: object, arguments: object, conversation: str, model: str, prompt: str) -> RecordedCall:
    if not isinstance(tool, str) or not tool:
        raise _Unrecognised("a tool call without a tool name")
    # Text stays as the model wrote it (OpenAI records the arguments as JSON text); anything else is JSON.
    raw = arguments.encode() if isinstance(arguments, str) else json.dumps(arguments).encode()
    return RecordedCall(tool, raw, conversation, model, prompt)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
