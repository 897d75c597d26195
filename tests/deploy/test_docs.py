"""The deployment docs point at things that exist: every relative link resolves and every
`lagscope` command they show (in code) is a real command."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main

from lagscope.cli import app as lagscope_app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / n for n in ("index.md", "architecture.md", "operations.md", "troubleshooting.md", "burrow.md")]
DOCS.append(ROOT / "deploy" / "spark" / "README.md")

_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")
_COMMAND = re.compile(r"(?:^|&& |; |\| |\$ )\s*lagscope ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?", re.MULTILINE)


def shown_commands(text: str) -> list[tuple[str, str]]:
    """`lagscope X [Y]` in code blocks and inline code, the only places commands are shown."""
    code = _FENCE.findall(text) + _INLINE.findall(_FENCE.sub("", text))
    return [m for chunk in code for m in _COMMAND.findall(chunk)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path) -> None:
    targets = [t for t in _LINK.findall(doc.read_text()) if "://" not in t]
    for target in targets:
        assert (doc.parent / target).exists(), f"{doc.name} links to {target}, which does not exist"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_commands_shown_exist(doc: Path) -> None:
    root: Any = typer.main.get_command(lagscope_app)
    shown = shown_commands(doc.read_text())
    assert shown, f"{doc.name} shows no lagscope command"
    for name, sub in shown:
        cmd = root.commands.get(name)
        assert cmd is not None, f"{doc.name} shows `lagscope {name}`, which does not exist"
        if sub and hasattr(cmd, "commands"):
            assert sub in cmd.commands, f"{doc.name} shows `lagscope {name} {sub}`, which does not exist"
