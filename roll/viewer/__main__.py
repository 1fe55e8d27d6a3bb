"""`python -m roll.viewer output/<exp_name>`: write a run's report.html and learning-curve plots."""

from __future__ import annotations

import argparse
import sys

from roll.viewer import find_logging_dir, write_run_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m roll.viewer", description=__doc__)
    parser.add_argument("run", help="a run's output folder (output/<exp_name>) or its logging_dir (holds metrics.jsonl)")
    parser.add_argument("--title", help="page title (default: the run's folder name)")
    args = parser.parse_args(argv)
    try:
        logging_dir = find_logging_dir(args.run)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report, plots = write_run_report(logging_dir, args.title)
    print(f"report: {report}")
    for path in plots:
        print(f"plot:   {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
