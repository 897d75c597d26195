"""The ``lagscope`` command (and ``python -m lagscope``): the process's allocators are set
first, before anything imports pyarrow (:mod:`lagscope.memory`), then the command line runs
(:mod:`lagscope.cli`)."""

from __future__ import annotations

from lagscope.memory import tune_allocators


def main() -> None:
    tune_allocators()
    from lagscope.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
