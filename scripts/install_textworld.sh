#!/usr/bin/env bash
# Installs the optional TextWorld extra (env_type: textworld) into roll's environment (the active
# virtual environment, else .venv; run scripts/bootstrap.sh first). Its jericho dependency compiles a
# Z-machine interpreter with gcc/make at install time (minutes), so bootstrap leaves it out and CI
# (.ci/run) runs this. Installs gcc/make with apt when they are missing. Idempotent.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; PY="${PY:-$ROOT/.venv/bin/python}"
if "$PY" -c "import textworld" 2>/dev/null; then
  exit 0
fi
if ! command -v gcc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "[textworld] needs gcc and make to build jericho; install them and rerun" >&2
    exit 1
  fi
  echo "[textworld] installing gcc and make with apt"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends gcc make libc6-dev
fi
echo "[textworld] installing roll[textworld] into $("$PY" -c 'import sys; print(sys.prefix)') (builds jericho)"
start=$SECONDS
"$PY" -m pip install -q -e "$ROOT[textworld]"
"$PY" -c "import textworld, textworld.gym"
echo "[textworld] done in $((SECONDS - start)) s"
