#!/usr/bin/env bash
# mypy --strict over the whole distribution, as it is installed: the top-level folders (the rooms:
# collector/, analytics/, dashboards/, app/, alerts/, burrow/, deploy/, devtools/) import as
# lagscope.<folder>, a mapping mypy cannot follow from the source tree. So build a tree of
# symlinks in that shape and check it; imports between the packages are then type-checked, not
# treated as missing.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/typecheck
rm -rf "$tree"
mkdir -p "$tree/lagscope"
for entry in lagscope/*; do
  ln -s "$PWD/$entry" "$tree/lagscope/$(basename "$entry")"
done
for pkg in collector analytics dashboards app alerts burrow deploy devtools; do
  mkdir -p "$tree/lagscope/$pkg"
  for entry in "$pkg"/*; do
    case "$(basename "$entry")" in kafka|__pycache__) continue ;; esac
    ln -s "$PWD/$entry" "$tree/lagscope/$pkg/$(basename "$entry")"
  done
done
exec .venv/bin/mypy --config-file pyproject.toml "$tree/lagscope"
