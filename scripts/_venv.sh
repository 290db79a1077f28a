# Sourced by scripts/test, scripts/demo and the benchmarks: make .venv exist and match pyproject.toml.
# The venv is rebuilt when pyproject.toml changes (a stamp holds its hash). Needs Python >= 3.11.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
stamp="$(sha256sum pyproject.toml | cut -c1-64)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrapping .venv with $($PYTHON --version)" >&2
  "$PYTHON" -m venv "$VENV"
fi
if [ "$(cat "$VENV/.replaykit-stamp" 2>/dev/null)" != "$stamp" ]; then
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet -e ".[test,docs]" >&2
  echo "$stamp" > "$VENV/.replaykit-stamp"
fi
# replaykit's own bytecode, written once: every scenario run starts a Python target, which with
# PYTHONDONTWRITEBYTECODE set (as on this kind of machine) would compile the editable package from source each time.
"$VENV/bin/python" -m compileall -q replaykit >&2
export PATH="$VENV/bin:$PATH"
