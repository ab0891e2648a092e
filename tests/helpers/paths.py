"""Paths of this checkout that tests read or run."""

from __future__ import annotations

from pathlib import Path

# tests/helpers/paths.py -> the checkout
REPO_ROOT = Path(__file__).resolve().parents[2]
