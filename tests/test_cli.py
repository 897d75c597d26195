"""The ``lagscope`` entry point: lagscope's own errors become one plain line and exit status 1."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lagscope.cli import main


def _main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    """``lagscope ARGS`` in this process (the entry point, with its error handling): (status, stderr)."""
    monkeypatch.setattr(sys, "argv", ["lagscope", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("name", ["x[/]y", "x[bold]y", "x[/bold]y"])
def test_error_text_is_printed_as_is(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # a path with square brackets is text, not console markup: no MarkupError traceback, nothing eaten
    lake = tmp_path / name
    code, err = _main(capsys, monkeypatch, "analyze", "--lake", str(lake), "--since", "2026-01-01")
    assert code == 1
    assert err == f"error: --lake {lake}: no such folder\n"


def test_long_error_stays_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # stderr is not a terminal here (80 columns assumed): the line must not be wrapped
    lake = tmp_path / ("a-rather-long-folder-name-" * 6)
    code, err = _main(capsys, monkeypatch, "analyze", "--lake", str(lake), "--since", "2026-01-01")
    assert code == 1
    assert err == f"error: --lake {lake}: no such folder\n"


def test_lag_table_shows_names_as_text() -> None:
    # group and client ids are free text in Kafka: "[…]" in them is shown, not read as markup
    import io

    from rich.console import Console

    from lagscope.collector.cli import lag_table

    offsets = [{"group_id": "billing[/]", "group_state": "Stable", "topic": "orders", "partition": 0,
                "committed_offset": 5, "log_end_offset": 7, "lag": 2, "member_id": "m-1", "host": "/10.0.0.1",
                "client_id": "worker[bold]"}]
    members = [{"group_id": "idle[red]", "group_state": "Empty", "member_id": None, "host": None,
                "client_id": None}]
    out = io.StringIO()
    Console(file=out, width=300).print(lag_table(offsets, members))
    text = out.getvalue()
    for name in ("billing[/]", "worker[bold]", "idle[red]"):
        assert name in text
