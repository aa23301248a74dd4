"""The README's first example runs as written, twice in a row in the same folder."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def first_python_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", readme, re.S)
    assert block, "README: no python example"
    return block.group(1)


def test_the_first_readme_example_runs_twice(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(first_python_example(), encoding="utf-8")
    outputs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        outputs.append(out.stdout)
    assert outputs[0] == outputs[1]  # the second run stored nothing twice
    ranked, *context = outputs[0].splitlines()
    assert ranked.startswith("1 2024-03-02") and "Maya" in ranked and "('t1',)" in ranked
    assert context[0] == "[2 March 2024]" and "knee" in context[1]  # the context is printed
