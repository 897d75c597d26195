# The two commands of the README. Everything they need is installed by scripts/setup.sh.
.PHONY: demo test setup lint

demo:
	scripts/setup.sh
	.venv/bin/lagscope demo

test:
	scripts/setup.sh --system
	.venv/bin/ruff check .
	scripts/typecheck.sh
	.venv/bin/pytest

lint:
	.venv/bin/ruff check .
	scripts/typecheck.sh
