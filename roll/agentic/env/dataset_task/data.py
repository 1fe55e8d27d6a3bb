"""Task records from a local parquet or JSONL file; a Hugging Face Hub name is refused with how to
point ``dataset_name`` at a local copy (roll never downloads data)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

DATA_SUFFIXES = (".parquet", ".jsonl")


def resolve_data_file(dataset_name: str, split: Optional[str]) -> Path:
    """The file ``dataset_name`` names: a .parquet/.jsonl file, or a folder holding ``<split>.parquet``
    or ``<split>.jsonl`` (split defaults to ``train``, as ROLL's configs read a hub dataset's split)."""
    path = Path(dataset_name).expanduser()
    if path.is_dir():
        candidates = [path / f"{split or 'train'}{suffix}" for suffix in DATA_SUFFIXES]
        found = [c for c in candidates if c.is_file()]
        if not found:
            raise ValueError(f"env_config.dataset_name: folder {str(path)!r} holds neither "
                             f"{' nor '.join(c.name for c in candidates)} (env_config.split picks the file)")
        return found[0]
    if path.is_file():
        if path.suffix not in DATA_SUFFIXES:
            raise ValueError(f"env_config.dataset_name: {str(path)!r} is not a .parquet or .jsonl file")
        return path
    raise ValueError(
        f"env_config.dataset_name: {dataset_name!r} is not a local file or folder. It names a Hugging Face Hub "
        f"dataset, which roll does not download. Download it where there is network (e.g. `huggingface-cli download "
        f"--repo-type dataset {dataset_name} --local-dir DIR`), then set env_config.dataset_name to a local "
        f".parquet or .jsonl file of it, or to a folder holding <split>.parquet / <split>.jsonl.")


@lru_cache(maxsize=16)
def _read(path: str, mtime: float) -> tuple[dict[str, Any], ...]:
    if path.endswith(".parquet"):
        try:
            import pyarrow.parquet as pq  # optional: only parquet data needs it
        except ImportError:
            raise ImportError(f"reading {path} needs pyarrow: pip install pyarrow (or give a .jsonl file)") from None
        return tuple(pq.read_table(path).to_pylist())
    records = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
    return tuple(records)


def load_records(dataset_name: str, split: Optional[str], required_keys: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    """The file's records (read once per process), each checked to hold ``required_keys``."""
    path = resolve_data_file(dataset_name, split)
    records = _read(str(path), path.stat().st_mtime)
    if not records:
        raise ValueError(f"env_config.dataset_name: {str(path)!r} holds no records")
    for index, record in enumerate(records):
        missing = [key for key in required_keys if not isinstance(record, dict) or key not in record]
        if missing:
            keys = sorted(record) if isinstance(record, dict) else type(record).__name__
            raise ValueError(f"env_config.dataset_name: record {index} of {str(path)!r} lacks {missing} (it has "
                             f"{keys}); set env_config.question_key / answer_key / test_key to its column names")
    return records
