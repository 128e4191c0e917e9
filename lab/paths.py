# SPDX-License-Identifier: GPL-2.0-only
"""Where things live: the repo, and the git-ignored cache (kernel, packages, images, run logs)."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cache() -> Path:
    """LOCALITY_CACHE overrides the default <repo>/.cache (CI points it at a per-machine folder to reuse downloads)."""
    return Path(os.environ.get("LOCALITY_CACHE", REPO / ".cache")).resolve()


def kernel_dir() -> Path:
    return cache() / "kernel"


def debs_dir() -> Path:
    return cache() / "debs"


def images_dir() -> Path:
    return cache() / "images"


def runs_dir() -> Path:
    return Path(os.environ.get("LOCALITY_RUNS", REPO / "runs")).resolve()
