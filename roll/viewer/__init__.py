"""See what the agent did: saved trajectories, learning-curve plots and a static HTML report of a run.

`python -m roll.viewer output/<exp_name>` writes the report (and plots) of a finished or running run.
"""

from roll.viewer.plots import write_plots
from roll.viewer.report import find_logging_dir, write_report

__all__ = ["write_plots", "write_report", "find_logging_dir", "write_run_report"]


def write_run_report(logging_dir, title: str | None = None):
    """Plots first (the report links them), then report.html; returns (report path, plot paths)."""
    plots = write_plots(logging_dir)
    return write_report(logging_dir, title), plots
