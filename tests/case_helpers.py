"""The oracle tier's recorded cases (fixtures/dryrun/cases) as tests edit them: one copy for every
test file that derives a variant of a case's YAML."""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "fixtures" / "dryrun" / "cases"


def variant(tmp_path: Path, base: str, changes: dict, name: str = "v.yaml") -> str:
    """``base`` (a corpus YAML) with dotted ``changes`` applied, written under ``tmp_path``."""
    data = yaml.safe_load((CASES / base).read_text(encoding="utf-8"))
    for key, value in changes.items():
        node = data
        *parents, last = key.split(".")
        for k in parents:
            node = node.setdefault(k, {})
        node[last] = value
    out = tmp_path / name
    out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(out)
