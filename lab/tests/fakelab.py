# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab with a shell script in QEMU's place, for tests of what the lab does around QEMU (signals, cleanup,
the guest's records) without booting a guest. Only QEMU's binary, the kernel and the image are replaced: the
command line, the process handling and the parsing are the lab's own."""
import os
import subprocess
import sys
import time
from pathlib import Path

from lab import paths

# Finds ctl.log in its arguments (-serial file:PATH) as QEMU would, then plays $FAKE_MODE:
#   hang: boots, starts a child (as if QEMU had helpers) and waits forever;
#   records: writes $FAKE_RECORDS as the guest's records, a console line with terminal escapes, and exits.
FAKE_QEMU = r"""#!/bin/sh
for a; do case "$a" in file:*) ctl="${a#file:}";; esac; done
echo "$$" > "$FAKE_PIDS.tmp"
case "$FAKE_MODE" in
hang)
    sleep 1000 &
    echo "$!" >> "$FAKE_PIDS.tmp"
    mv "$FAKE_PIDS.tmp" "$FAKE_PIDS"
    printf '@@booted 1.0\n' > "$ctl"
    echo "fake guest console"
    wait ;;
records)
    mv "$FAKE_PIDS.tmp" "$FAKE_PIDS"
    cat "$FAKE_RECORDS" > "$ctl"
    printf 'fake guest console \033]0;retitled\007\033[2J\r\n' ;;
esac
"""

RUNNER = r"""
import os, sys
from pathlib import Path
from lab import image, run, setup, __main__ as cli
tmp = Path(sys.argv[1])
setup.kernel_files = lambda: ("7.3.4+fake", tmp / "vmlinuz", tmp / "config")
image.build = lambda include_scheduler=True, log=None, extras=(): tmp / "base.cpio.gz"
run.QEMU = str(tmp / "qemu")
run.qemu_has_seccomp = lambda *a: True
if os.environ.get("FAKE_FILE_MAX"):
    run.GUEST_FILE_MAX_BYTES = int(os.environ["FAKE_FILE_MAX"])
if os.environ.get("FAKE_FAIL"):
    # fails once the fake QEMU has written its pids (started its child): a failure before would kill it before
    # it says which processes the test is to find dead
    pids, real_poll = Path(os.environ["FAKE_PIDS"]), run._CtlWatcher.poll
    def poll(self):
        if not pids.exists():
            return real_poll(self)
        raise RuntimeError("injected failure")
    run._CtlWatcher.poll = poll
sys.exit(cli.main(sys.argv[2:]))
"""


def start(tmp: Path, mode: str, lab_args: list[str], records: bytes = b"", env: dict | None = None):
    """Start bin/lab's main() in a new process with the fake QEMU; returns the Popen."""
    (tmp / "vmlinuz").write_bytes(b"fake kernel")
    (tmp / "config").write_text("")
    (tmp / "base.cpio.gz").write_bytes(b"fake image")
    q = tmp / "qemu"
    q.write_text(FAKE_QEMU)
    q.chmod(0o755)
    (tmp / "records").write_bytes(records)
    e = dict(os.environ, FAKE_MODE=mode, FAKE_PIDS=str(tmp / "pids"), FAKE_RECORDS=str(tmp / "records"),
             LOCALITY_RUNS=str(tmp / "runs"), PYTHONPATH=str(paths.REPO), **(env or {}))
    return subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp), *lab_args], cwd=paths.REPO, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_pids(tmp: Path, timeout: float = 60) -> list[int]:
    """The fake QEMU's pid and its child's, once it has started them."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (tmp / "pids").exists():
            return [int(x) for x in (tmp / "pids").read_text().split()]
        time.sleep(0.1)
    raise AssertionError("the fake QEMU did not start")


def alive(pid: int) -> bool:
    """True if pid is a live process (a zombie is dead: it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill(pids: list[int]) -> None:
    """Test cleanup: whatever the lab left running."""
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def run_dirs(tmp: Path) -> list[Path]:
    return sorted((tmp / "runs").iterdir()) if (tmp / "runs").exists() else []
