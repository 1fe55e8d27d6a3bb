"""The layers of docs/internals.md. import-linter checks that each package imports only the ones below
it and that no package's modules import each other in a circle (the contracts in pyproject.toml; the
test command runs `lint-imports`). This test checks the one rule a contract cannot express: no roll
import hidden inside a function body, where it would dodge those contracts at import time. The only
exception is a module whose own dependency is optional, and the function's docstring says so."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT


def hidden_roll_imports(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """`file:line module` for each `from roll...`/`import roll...` inside a function whose docstring does
    not say "optional"."""
    found = []
    for func in ast.walk(ast.parse(path.read_text())):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if "optional" in (ast.get_docstring(func) or "").lower():
            continue
        for node in ast.walk(func):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(root)}:{node.lineno} {m}" for m in modules if m.split(".")[0] == "roll"]
    return found


def test_no_roll_import_hides_in_a_function_body():
    hidden = [line for path in sorted((REPO_ROOT / "roll").rglob("*.py")) for line in hidden_roll_imports(path)]
    assert not hidden, "roll imports inside functions (import at the top of the module):\n" + "\n".join(hidden)


def test_the_checker_sees_a_hidden_import_and_the_documented_exception(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text('def f():\n    """Docs."""\n    from roll.data.batch import Batch\n    return Batch\n\n\n'
                      'def g():\n    """vllm is an optional dependency."""\n    import roll.strategies.vllm_infer\n')
    assert hidden_roll_imports(module, root=tmp_path) == ["probe.py:3 roll.data.batch"]


def test_the_layers_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is a dev dependency: pip install -e '.[dev]'"
    result = subprocess.run([lint, "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Contracts: 2 kept, 0 broken." in result.stdout
