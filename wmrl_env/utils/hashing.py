"""One content hash for artifacts (program text, action plans), shared by every component.

Example:
    >>> artifact_hash("print('hi')")[:16]
    'c2d0a5e0790d97a0'
"""

from __future__ import annotations

import hashlib

__all__ = ["artifact_hash"]


def artifact_hash(artifact: str | bytes) -> str:
    """SHA-256 hex digest of the artifact (UTF-8 encoded when it is text)."""
    data = artifact.encode("utf-8") if isinstance(artifact, str) else artifact
    return hashlib.sha256(data).hexdigest()
