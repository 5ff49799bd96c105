"""Resources: where the built-in email templates and role definitions live (wheel or checkout)."""

from __future__ import annotations

from pathlib import Path


def builtin_dir(name: str) -> Path:
    """``email-templates`` or ``roles``: packaged under workflow/_data, or at the checkout root."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_data" / name
    if packaged.is_dir():
        return packaged
    return package.parent / name
