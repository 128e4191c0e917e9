# SPDX-License-Identifier: GPL-2.0-only
"""The shared image cache: concurrent builds are atomic and locked, and no build removes an image another run
may be using."""
import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import image, paths

pytestmark = pytest.mark.skipif(not os.path.exists(image.BUSYBOX), reason="busybox-static missing (bin/lab setup)")

# Builds a small image from busybox, the guest's init and one marker file. With a "go" file named, it starts
# only once that exists, and a pause in its first copy makes two builds started together overlap for sure.
BUILDER = r"""
import os, shutil, sys, time
from lab import image
marker = sys.argv[1]
if len(sys.argv) > 2:
    open(sys.argv[2] + f".ready{os.getpid()}", "w").close()
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
image.collect_inputs = lambda include_scheduler=True: {"/bin/busybox": image.BUSYBOX,
                                                       "/init": str(image.GUEST_DIR / "init"), "/marker": marker}
copy2 = shutil.copy2
def slow_copy2(src, dst, **kw):
    time.sleep(0.02 if src != image.BUSYBOX else 1.5)
    return copy2(src, dst, **kw)
image.shutil.copy2 = slow_copy2
print(image.build(include_scheduler=False, log=lambda s: print(s, file=sys.stderr, flush=True)))
"""


def build(cache: Path, marker: Path, go: Path | None = None):
    env = dict(os.environ, LOCALITY_CACHE=str(cache), PYTHONPATH=str(paths.REPO))
    return subprocess.Popen([sys.executable, "-c", BUILDER, str(marker), *([str(go)] if go else [])], env=env,
                            cwd=paths.REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_builds_at_once_share_one_whole_image(tmp_path):
    marker = tmp_path / "marker"
    marker.write_text("one\n")
    go = tmp_path / "go"
    a, b = build(tmp_path / "cache", marker, go), build(tmp_path / "cache", marker, go)
    end = time.monotonic() + 120
    while len(list(tmp_path.glob("go.ready*"))) < 2 and time.monotonic() < end:
        time.sleep(0.01)
    go.touch()
    (out_a, err_a), (out_b, err_b) = a.communicate(timeout=300), b.communicate(timeout=300)
    assert a.returncode == 0 and b.returncode == 0, err_a + err_b
    assert out_a == out_b
    img = Path(out_a.strip())
    cpio = gzip.decompress(img.read_bytes())  # whole and readable
    assert b"marker" in cpio and b"TRAILER!!!" in cpio
    assert (err_a + err_b).count("building guest image") == 1  # the second waited, then reused it
    assert "waiting for another run's image build" in err_a + err_b
    assert sorted(p.name for p in img.parent.iterdir()) == [".lock", img.name]  # no temporary left


def test_a_build_leaves_other_images_alone(tmp_path):
    """Two clones (or scheduler builds) sharing a cache: B's build keeps A's image, which A may be booting."""
    cache = tmp_path / "cache"
    m1, m2 = tmp_path / "m1", tmp_path / "m2"
    m1.write_text("clone A\n")
    m2.write_text("clone B, other inputs\n")
    img = []
    for m in (m1, m2):
        p = build(cache, m)
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        img.append(Path(out.strip()))
    assert img[0] != img[1] and img[0].exists() and img[1].exists()


def test_prune_only_long_unused_images_and_dead_temporaries(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALITY_CACHE", str(tmp_path))
    d = paths.images_dir()
    d.mkdir(parents=True)
    keep, recent, stale = d / "base-1.cpio.gz", d / "base-2.cpio.gz", d / "base-3.cpio.gz"
    tmp = d / ".base-4.cpio.gz.x.tmp"
    for p in (keep, recent, stale, tmp):
        p.write_bytes(b"x")
    old = time.time() - image.IMAGE_KEEP_S - 60
    os.utime(stale, (old, old))
    os.utime(keep, (old, old))
    assert image._reuse(keep) and time.time() - keep.stat().st_mtime < 60  # a reuse marks it as in use
    image._prune(d, keep=keep)
    assert sorted(p.name for p in d.iterdir()) == ["base-1.cpio.gz", "base-2.cpio.gz"]
