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
Any line may carry the session its calls were made in, {"session": {"customer_id": ..., "tenant": ...}}:
sets scoped per customer or tenant, and ownership, are judged in it (without one, a scoped set's check
reads MISSING_SCOPE, as a live call without a session does).
A line that is not JSON, or JSON of no known shape, is counted as malformed with its reason, and
reading goes on. Files ending in .gz (or starting with gzip's magic bytes) are read through gzip.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import IO, Any

import orjson

from argwatch.common.files import open_regular

MAX_LINE_BYTES = 16 << 20  # one transcript line; a longer one is malformed, never held whole


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One tool call as recorded: the arguments as the model wrote them (JSON text)."""

    tool: str
    arguments_json: bytes
    conversation_id: str = ""
    model: str = ""
    prompt_version: str = ""
    call_id: str = ""  # the provider's id for the call, where the shape has one (tool_calls[].id, call_id, ...)
    customer_id: str = ""  # the session's, where the line records one
    tenant: str = ""


@dataclass
class ReadCounts:
    """What reading the corpus met, line by line."""

    files: int = 0
    lines: int = 0
    lines_with_calls: int = 0
    lines_without_calls: int = 0  # a known shape with no tool call in it (a user turn, a text answer)
    duplicates: int = 0  # calls seen before under the same provider call id (a transcript repeats its turns)
    malformed: Counter[str] = field(default_factory=Counter)  # reason -> lines


GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"
SEEN_IDS_KEPT = 1_000_000  # provider call ids remembered to drop repeats (~100 MB at most)


def read_corpus(paths: list[str], counts: ReadCounts, progress: Any = None) -> Iterator[RecordedCall]:
    """Every tool call in `paths`, in order, each once; `counts` is updated as lines are read.
    `progress(done, total)` is told the bytes read so far of all the files (compressed bytes for gzip).

    A transcript repeats its earlier turns (a log of each request's whole `messages`, a response and
    then the transcript it joins), so a call whose provider id (tool_calls[].id, call_id, tool_use.id)
    was seen already is counted as a duplicate, not judged again."""
    total = sum(os.path.getsize(path) for path in paths)
    done_before = 0
    seen: OrderedDict[tuple[str, str], None] = OrderedDict()
    for path in paths:
        counts.files += 1
        with open_regular(path) as raw:
            # By the magic bytes only: a plain file named .gz is read as it is.
            stream: IO[bytes] = gzip.GzipFile(fileobj=raw) if raw.read(2) == GZIP_MAGIC else raw  # type: ignore[assignment]
            raw.seek(0)
            try:
                for number, line in enumerate(_bounded_lines(stream), start=1):
                    counts.lines += 1
                    if progress is not None and number % 1000 == 0:
                        progress(done_before + raw.tell(), total)
                    if number == 1 and line is not None and line.startswith(BOM):
                        line = line[len(BOM) :]
                    found = _calls_of_line(line, counts)
                    if found:
                        counts.lines_with_calls += 1
                        yield from (call for call in found if _first_time(call, seen, counts))
            except (EOFError, gzip.BadGzipFile, zlib.error):
                # What was read stays counted and judged; the rest of this file cannot be read.
                counts.malformed["a truncated or corrupt gzip stream (the rest of its file unread)"] += 1
        done_before += os.path.getsize(path)
    if progress is not None:
        progress(total, total)


def _bounded_lines(stream: IO[bytes]) -> Iterator[bytes | None]:
    """The stream's lines, each read at most MAX_LINE_BYTES at a time: a longer line is None, and the rest
    of it is skipped in chunks, so neither a huge line nor a gzip bomb is ever held whole."""
    while line := stream.readline(MAX_LINE_BYTES + 1):
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := stream.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield None
            continue
        yield line


def _first_time(call: RecordedCall, seen: OrderedDict[tuple[str, str], None], counts: ReadCounts) -> bool:
    if not call.call_id:  # MCP ids and plain lines repeat across sessions: never a duplicate by id
        return True
    key = (call.call_id, call.tool)
    if key in seen:
        counts.duplicates += 1
        return False
    seen[key] = None
    if len(seen) > SEEN_IDS_KEPT:
        seen.popitem(last=False)
    return True


def _calls_of_line(line: bytes | None, counts: ReadCounts) -> list[RecordedCall]:
    if line is None:
        counts.malformed["a line longer than 16 MiB"] += 1
        return []
    if not line.strip():
        return []
    try:
        document = orjson.loads(line)
    except orjson.JSONDecodeError:
        counts.malformed["not JSON"] += 1
        return []
    try:
        calls = list(calls_in(document))
    except _Unrecognised as why:
        counts.malformed[str(why)] += 1
        return []
    except (TypeError, AttributeError, ValueError, KeyError):  # a known shape with fields of other types
        counts.malformed["a known shape with fields of unexpected types"] += 1
        return []
    if not calls:
        counts.lines_without_calls += 1
    return calls


class _Unrecognised(ValueError):
    """A JSON line of no shape this reader knows (its message is the reason, counted)."""


def calls_in(document: object) -> Iterator[RecordedCall]:
    """The tool calls of one recorded document, each in the line's session if it records one; raises
    _Unrecognised for a shape it does not know."""
    session = document.get("session") if isinstance(document, dict) else None
    if not isinstance(session, dict):
        yield from _calls_in(document)
        return
    customer = _text(session.get("customer_id"))[:MAX_SESSION_CHARS]
    tenant = _text(session.get("tenant"))[:MAX_SESSION_CHARS]
    for call in _calls_in(document):
        yield replace(call, customer_id=customer, tenant=tenant)


MAX_SESSION_CHARS = 256  # as the gateway takes them (edge/request_limits.py)


def _calls_in(document: object) -> Iterator[RecordedCall]:
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
                yield _call(block.get("name"), block.get("input", {}), conversation, model, prompt, block.get("id"))


def _chat_message(message: object, conversation: str, model: str, prompt: str) -> Iterator[RecordedCall]:
    if not isinstance(message, dict):
        return
    for tool_call in message.get("tool_calls") or []:
        function = tool_call.get("function") if isinstance(tool_call, dict) else None
        if isinstance(function, dict):
            call_id = tool_call.get("id")
            yield _call(function.get("name"), function.get("arguments", ""), conversation, model, prompt, call_id)


def _responses_items(items: object, conversation: str, model: str, prompt: str) -> Iterator[RecordedCall]:
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call":
            call_id = item.get("call_id")
            yield _call(item.get("name"), item.get("arguments", ""), conversation, model, prompt, call_id)


def _call(
    tool: object, arguments: object, conversation: str, model: str, prompt: str, call_id: object = ""
) -> RecordedCall:
    if not isinstance(tool, str) or not tool:
        raise _Unrecognised("a tool call without a tool name")
    # Text stays as the model wrote it (OpenAI records the arguments as JSON text); anything else is JSON.
    raw = arguments.encode() if isinstance(arguments, str) else json.dumps(arguments).encode()
    return RecordedCall(tool, raw, conversation, model, prompt, _text(call_id))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
