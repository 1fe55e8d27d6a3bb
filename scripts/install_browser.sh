#!/usr/bin/env bash
# Installs Debian's chromium when no headless browser is present: tests/pipeline/test_report.py renders
# the run report with it (and skips, saying why, when there is none). Needs root (CI runs as root);
# elsewhere it prints what to run instead of failing.
set -euo pipefail
for browser in chromium chromium-browser google-chrome; do
  if command -v "$browser" >/dev/null 2>&1; then exit 0; fi
done
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "[install_browser] no chromium; the report test will skip. Install it with: sudo apt-get install -y chromium" >&2
  exit 0
fi
echo "[install_browser] installing chromium (apt-get)"
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
