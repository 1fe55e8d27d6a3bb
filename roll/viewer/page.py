"""The report page's style and script, kept as plain files in roll/viewer/static/ (report.css, report.js:
no libraries, nothing fetched) and read as package data, so the report inlines them into one HTML file."""

from importlib.resources import files

_STATIC = files("roll.viewer") / "static"

PAGE_STYLE = (_STATIC / "report.css").read_text(encoding="utf-8")
PAGE_SCRIPT = (_STATIC / "report.js").read_text(encoding="utf-8")
