# SPDX-License-Identifier: GPL-2.0-only
"""A reader that went away (`bin/lab machines -v | head -1`) stops the lab quietly: one line, exit 130."""
import os
import subprocess

from lab import paths, run


def test_closed_output_is_an_interrupt_not_a_traceback():
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the lab writes its first line
    try:
        p = subprocess.run([str(paths.REPO / "bin" / "lab"), "machines", "-v"], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(w)
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    assert p.returncode == run.EXIT_INTERRUPTED, (p.returncode, p.stderr)
    assert "broken pipe" in p.stderr
