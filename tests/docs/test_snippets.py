"""Every snippet in docs/*.md and README.md works as written.

Each fenced block is checked by its language: Python compiles, YAML is read
strictly and a whole policy loads through the real loader, and every
`argwatch ...` line in a shell block parses with the real command line (the
offline ones, such as `argwatch policy check FILE` on a file that exists, and
`--help`, are run). An HTML comment on the line before a block says more:

- `<!-- snippet: run GATEWAY -->`: the block is run against a real gateway
  this test starts, GATEWAY being `demo` (examples/policy.yaml with the demo
  owning service), `first-policy` (examples/first-policy/) or
  `first-policy-reject` (the same with `mode: observe` changed to
  `mode: reject`, as the tutorial does). The docs' addresses (127.0.0.1:50051,
  :50052, :9464) are swapped for the test gateway's; a Python block runs as a
  script, a shell block's `argwatch` lines as commands, each must exit 0, in
  examples/first-policy/ (a copy of it for the reject step) for the tutorial. A shell block's `python`
  lines run too, with this test's interpreter.
- `<!-- snippet: output -->`: what the run block before it prints, exactly.
- `<!-- snippet: file PATH -->`: the block is the repository's file PATH.
- `<!-- snippet: fragment -->`: a YAML part of a policy, read but not loaded.

Several go in one comment, separated by `;` (`file PATH; run first-policy`).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shlex
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from argwatch.server.cli import main
from argwatch.server.cli.parser import build_parser
from argwatch.server.policy.loader import load_policy, parse_policy
from argwatch.server.policy.strict_yaml import load_yaml
from argwatch.server.process.app import RunningGateway
from argwatch.sources import RecordStore, ValueSetCatalog, serve
from tests.conftest import gateway_on

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
FIRST_POLICY = ROOT / "examples" / "first-policy"
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$")
POLICY_KEYS = {
    "default_mode",
    "sources",
    "value_sets",
    "tools",
    "tool_definitions",
    "repair",
    "sampling",
    "attention",
    "formats",
    "models",
}
ARGWATCH = os.path.join(os.path.dirname(sys.executable), "argwatch")


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int  # the opening fence's, from 1
    language: str
    text: str
    marker: str  # the words after "snippet:" in the comment above, or ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def said(self, directive: str) -> str | None:
        """What follows `directive` in the marker ("" when it stands alone), or None when it is not there."""
        for part in self.marker.split(";"):
            words = part.strip()
            if words == directive or words.startswith(directive + " "):
                return words.removeprefix(directive).strip()
        return None


def read_snippets(page: Path) -> list[Snippet]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Snippet] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence, language = opening.groups()
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = "\n".join(line[len(indent) :] for line in lines[index + 1 : end])
        above = next((line for line in reversed(lines[:index]) if line.strip()), "")
        marked = MARKER.match(above)
        found.append(Snippet(page, index + 1, language, body, marked.group(1) if marked else ""))
        index = end + 1
    return found


SNIPPETS = [snippet for page in PAGES for snippet in read_snippets(page)]


def of(*languages: str) -> list[Snippet]:
    return [snippet for snippet in SNIPPETS if snippet.language in languages]


def ids(snippet: Snippet) -> str:
    return snippet.where


def output_after(snippet: Snippet) -> str | None:
    """The text of the `output` block right after `snippet` on its page, if there is one."""
    on_page = [other for other in SNIPPETS if other.page == snippet.page]
    following = on_page[on_page.index(snippet) + 1 :]
    return following[0].text if following and following[0].said("output") is not None else None


def command_lines(snippet: Snippet, program: str = "argwatch") -> Iterator[list[str]]:
    """Each `argwatch` (or `program`) command in a shell block, as its argv without the program's name, up to
    any pipe or `;`."""
    for line in snippet.text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line.strip().removeprefix("$ "), posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
        for operator, word in enumerate(words):
            if word and set(word) <= set(";&|<>"):
                words = words[:operator]
                break
        if words and os.path.basename(words[0]) == program:
            yield words[1:]


# Python --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("snippet", of("python", "py"), ids=ids)
def test_every_python_snippet_compiles(snippet: Snippet) -> None:
    """Plain Python, no top-level await: a reader pastes it into a file and it is valid there."""
    compile(snippet.text, snippet.where, "exec")


# YAML ----------------------------------------------------------------------------------------------------------


def whole_policy(document: object) -> bool:
    return isinstance(document, dict) and bool(document) and set(document) <= POLICY_KEYS and "tools" in document


@pytest.mark.parametrize("snippet", of("yaml", "yml"), ids=ids)
def test_every_yaml_snippet_is_strict_yaml_and_every_whole_policy_loads(snippet: Snippet, tmp_path: Path) -> None:
    """No key twice, no alias; a block that is a whole policy (its keys a policy's, with tools) loads."""
    document = load_yaml(snippet.text)
    if snippet.said("file") is not None:
        return  # the file itself is checked below, and loaded if it is a policy
    if whole_policy(document) and snippet.said("fragment") is None:
        parse_policy(snippet.text.encode(), str(tmp_path / "policy.yaml"))


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.said("file")], ids=ids)
def test_a_file_snippet_is_the_repository_s_file(snippet: Snippet) -> None:
    """The tutorial's files are in examples/first-policy/, and the page shows them as they are there."""
    path = ROOT / str(snippet.said("file"))
    assert path.read_text(encoding="utf-8") == snippet.text + "\n", f"{snippet.where} differs from {path}"
    if path.suffix == ".yaml" and whole_policy(load_yaml(snippet.text)):
        load_policy(str(path))


# Shell ---------------------------------------------------------------------------------------------------------

SHELL = [(snippet, argv) for snippet in of("sh", "bash", "shell", "console") for argv in command_lines(snippet)]


def shell_ids(case: tuple[Snippet, list[str]]) -> str:
    return f"{case[0].where} argwatch {' '.join(case[1])}"[:120]


@pytest.mark.parametrize("case", SHELL, ids=shell_ids)
def test_every_argwatch_command_in_the_docs_parses(case: tuple[Snippet, list[str]]) -> None:
    """Every option and command named in a shell block exists: a renamed flag fails here, not for a reader."""
    snippet, argv = case
    parser, _ = build_parser()
    if {"--help", "-h", "--version"} & set(argv):  # they print and exit 0
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 0, snippet.where
        return
    args, extra = parser.parse_known_args(argv)
    assert extra == [], f"{snippet.where}: argwatch {' '.join(argv)}: unrecognized {extra}"
    assert callable(args.run)


def folder_of(snippet: Snippet) -> Path:
    """Where a block's commands run: the tutorial's folder for its blocks, else the repository's root."""
    return FIRST_POLICY if (snippet.said("run") or "").startswith("first-policy") else ROOT


OFFLINE = [
    (snippet, argv)
    for snippet, argv in SHELL
    if argv[:2] == ["policy", "check"] and len(argv) == 3 and (folder_of(snippet) / argv[2]).is_file()
]


@pytest.mark.parametrize("case", OFFLINE, ids=shell_ids)
def test_policy_check_in_the_docs_passes_on_the_files_it_names(
    case: tuple[Snippet, list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`argwatch policy check FILE` on a file of the repository (the tutorial's, from its folder) says ok."""
    snippet, argv = case
    monkeypatch.chdir(folder_of(snippet))
    assert main(argv) == 0, capsys.readouterr().err
    shown = output_after(snippet)
    if shown is not None:
        assert steady(capsys.readouterr().out) == steady(shown)


def steady(text: str) -> str:
    """Output without what changes when a file does: a policy's version digest."""
    return re.sub(r"version [0-9a-f]{12}", "version ...", text).strip()


# Run against a real gateway ------------------------------------------------------------------------------------


def load_example(name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def gateway_for(name: str, folder: Path) -> AsyncIterator[RunningGateway]:
    """The gateway a `run` marker names, its files in `folder`."""
    owner = None
    if name == "demo":
        demo = load_example("demo_data")
        catalog = ValueSetCatalog()
        catalog.publish("refunds.reason_codes", demo.REASON_CODES, demo.RETIRED_REASON_CODES)  # type: ignore[attr-defined]
        catalog.publish("identity.active_handles", demo.active_handles())  # type: ignore[attr-defined]
        owner = await serve("127.0.0.1:0", catalog=catalog, records=RecordStore(demo.demo_orders()))  # type: ignore[attr-defined]
        shutil.copy(ROOT / "examples" / "value_sets.yaml", folder)
        text = (ROOT / "examples" / "policy.yaml").read_text().replace("127.0.0.1:50061", f"127.0.0.1:{owner.port}")
    else:
        for file in FIRST_POLICY.iterdir():
            shutil.copy(file, folder)
        text = (FIRST_POLICY / "policy.yaml").read_text()
        if name == "first-policy-reject":
            assert "mode: observe" in text
            text = text.replace("mode: observe", "mode: reject")
        else:
            assert name == "first-policy", f"unknown gateway {name!r}"
    gateway = await gateway_on(folder, text)
    try:
        yield gateway
    finally:
        await gateway.stop(0)
        if owner is not None:
            await owner.server.stop(0)


def addressed(text: str, gateway: RunningGateway) -> str:
    """The docs' addresses swapped for the test gateway's."""
    return (
        text.replace("127.0.0.1:50051", gateway.target)
        .replace("127.0.0.1:50052", gateway.admin_target)
        .replace("127.0.0.1:9464", f"127.0.0.1:{gateway.metrics_port}")
    )


def readdress(folder: Path, gateway: RunningGateway) -> None:
    """The scripts in `folder` (the tutorial's check_call.py, which a shell block runs) on the test gateway."""
    for script in folder.glob("*.py"):
        script.write_text(addressed(script.read_text(), gateway))


async def run(argv: list[str], folder: Path) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=folder, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


RUNNABLE = [snippet for snippet in SNIPPETS if snippet.said("run")]


@pytest.mark.parametrize("snippet", RUNNABLE, ids=ids)
async def test_a_runnable_snippet_runs_against_a_real_gateway(snippet: Snippet, tmp_path: Path) -> None:
    """The marked examples run, as a reader runs them, and print what the page shows after them."""
    name = str(snippet.said("run"))
    async with gateway_for(name, tmp_path) as gateway:
        readdress(tmp_path, gateway)
        printed = ""
        if snippet.language in ("python", "py"):
            script = tmp_path / "snippet.py"
            script.write_text(addressed(snippet.text, gateway))
            code, printed, err = await run([sys.executable, str(script)], tmp_path)
            assert code == 0, f"{snippet.where}: exit {code}\n{err}"
        else:
            commands = [[ARGWATCH, *argv] for argv in command_lines(snippet)]
            commands += [[sys.executable, *argv] for argv in command_lines(snippet, "python")]
            assert commands, f"{snippet.where}: a run marker on a block with no argwatch or python command"
            for argv in commands:
                argv = [addressed(word, gateway) for word in argv]
                code, out, err = await run(argv, tmp_path)
                assert code == 0, f"{snippet.where}: {' '.join(argv[1:])}: exit {code}\n{err}"
                printed += out
    shown = output_after(snippet)
    if shown is not None:
        assert steady(printed) == steady(shown), snippet.where
