"""The ``lagscope`` command (and ``python -m lagscope``): the process's allocators are set
around pyarrow's import (:mod:`lagscope.memory`), then the command line runs (:mod:`lagscope.cli`)."""

from __future__ import annotations

from lagscope import memory


def main() -> None:
    memory.tune_allocators()
    from lagscope.cli import main as cli  # imports pyarrow, which chooses its pool

    memory.settle()
    cli()


if __name__ == "__main__":
    main()
