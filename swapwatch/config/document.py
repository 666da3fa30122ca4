"""One training YAML as a document: its bytes, text, tree and line marks, read once and passed down.

Why: a command used to hand every consumer a *path*, and each one read the YAML again (behind a per-command
memo: ``diff`` made 10 ``read_yaml`` calls for two files). A :class:`TrainingDocument` is what a command reads
first; ``codepaths.of(doc)`` decides its MindFormers code path from it, and the sizers, the plan and the rules
take the document (or what it was built into) instead of its path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from ..errors import ConfigError
from .load import parse_yaml, read_config_text


@dataclass(frozen=True)
class TrainingDocument:
    """A training YAML as read: ``path`` (where it stands: errors name it, ``pretrained_model_dir`` resolves
    from its directory), ``text``, the parsed ``data`` (any YAML value; a LayerSetting loader refuses a
    non-mapping with its own line) and ``lines`` (dotted key path -> line)."""

    path: str
    text: str
    data: Any
    lines: Dict[str, int] = field(default_factory=dict)

    @classmethod
    def read(cls, path: str) -> "TrainingDocument":
        """Read and parse ``path`` (bounded: ``config.load.read_config_bytes``). A file that is not YAML is one
        line, exit 2; a worker log given instead says which command was meant (``file_kind``)."""
        try:
            text = read_config_text(path)
            return cls.from_text(text, path)
        except ConfigError:
            from ..file_kind import reject_log_as_config

            reject_log_as_config(path)
            raise

    @classmethod
    def from_text(cls, text: str, path: str) -> "TrainingDocument":
        """The document of ``text`` standing at ``path`` (e.g. the YAML ``plan`` writes, checked with no
        temporary file)."""
        data, lines = parse_yaml(text, path)
        return cls(path=path, text=text, data=data, lines=lines)

    @property
    def mapping(self) -> Dict[str, Any]:
        """The top level when it is a mapping, else an empty one."""
        return self.data if isinstance(self.data, dict) else {}

    def line(self, key: str) -> Optional[int]:
        """The line of ``key`` or of its nearest enclosing key (``config.load.nearest``)."""
        from .load import nearest

        return nearest(self.lines, key)
