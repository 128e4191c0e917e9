# SPDX-License-Identifier: GPL-2.0-only
"""The "kernbench" image extra: what lab/benchmarks/kernbench.toml compiles in the guest, and the compiler.

The tree is GNU libiberty (66 C files, about 46,000 lines) from the binutils source that Debian's
binutils-source package ships (/usr/src/binutils/binutils-<version>.tar.xz; bin/lab setup installs it through
lab/apt-packages.txt). It is configured here, on the host, once per tarball and toolchain (cached under
CACHE/kernbench/), so the guest only runs make: the guest runs the host's own gcc, binutils and make, so a tree
configured on the host matches it. A trial build on the host at the same flags, with -MD, lists the system
headers the tree includes; the extra carries those (about 170 files, 1.2 MB) instead of all of /usr/include.

In the guest: /usr/src/kernbench/{libiberty,include,...} (the sources), /usr/src/kernbench/build (configured,
not built) and /lab/kernbench.sh (lab/guest/kernbench.sh: copy, build, time).
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import paths, setup

GUEST_TREE = "/usr/src/kernbench"
GUEST_SCRIPT = "/lab/kernbench.sh"
SCRIPT = paths.REPO / "lab" / "guest" / "kernbench.sh"
TARBALL_GLOB = "/usr/src/binutils/binutils-*.tar.xz"
# What libiberty's configure and Makefile read beside the library's own folder.
TREE_MEMBERS = ("libiberty", "include", "config.guess", "config.sub", "install-sh", "mkinstalldirs",
                "move-if-change")
# Bump when stage() makes something else from the same tarball and toolchain.
STAGE_FORMAT = 1
HEADERS_LIST = "system-headers.txt"


def tarball() -> Path:
    """The binutils source tarball of Debian's binutils-source (the newest if several)."""
    found = sorted(glob.glob(TARBALL_GLOB))
    if not found:
        raise setup.SetupMissing(f"no {TARBALL_GLOB} (Debian package binutils-source); run: bin/lab setup")
    return Path(found[-1])


def toolchain() -> dict[str, str]:
    """Guest path -> host path of the compiler the build runs: gcc's driver and cc1, as, ar, ranlib, make."""
    files = {}
    for name in ("gcc", "as", "ar", "ranlib", "make"):
        host = shutil.which(name, path="/usr/bin:/bin")
        if host is None:
            raise setup.SetupMissing(f"{name} is missing on the host (Debian packages gcc, binutils, make); "
                                     "run: bin/lab setup")
        files[f"/usr/bin/{name}"] = os.path.realpath(host)
    r = subprocess.run([files["/usr/bin/gcc"], "-print-prog-name=cc1"], capture_output=True, text=True)
    cc1 = r.stdout.strip()
    if r.returncode != 0 or not os.path.isabs(cc1) or not os.path.exists(cc1):
        raise setup.SetupMissing(f"gcc does not name its cc1 ({cc1!r}); is gcc installed? run: bin/lab setup")
    files[cc1] = cc1
    return files


def _stage_key(tar: Path, tools: dict[str, str]) -> str:
    h = hashlib.sha256(f"kernbench stage {STAGE_FORMAT}\n".encode())
    for p in [str(tar)] + sorted(tools.values()):
        st = os.stat(p)
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _run(cmd: list[str], cwd: Path, what: str, env: dict | None = None) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-20:])
        raise RuntimeError(f"kernbench: {what} failed (exit {r.returncode}) in {cwd}:\n{tail}")


def _headers_from_depfiles(folder: Path) -> list[str]:
    """The absolute paths (system headers) that the .d files gcc -MD wrote in folder name."""
    found = set()
    for d in folder.glob("*.d"):
        for word in d.read_text().replace("\\\n", " ").split():
            if word.startswith("/") and not word.endswith(":"):
                found.add(os.path.normpath(word))
    return sorted(found)


def _staged(out: Path) -> bool:
    """Is out a finished stage whose system headers are all still on the host?"""
    return (out / HEADERS_LIST).exists() and all(os.path.exists(h) for h in headers(out))


def stage(lock, log=print, tools: dict[str, str] | None = None) -> Path:
    """CACHE/kernbench/KEY: the tree (sources and a configured build/ folder) and the list of system headers
    it includes; made once per tarball and toolchain (KEY, tools: toolchain() if not given), under
    lock(folder, log, what) (image.cache_lock)."""
    tar, tools = tarball(), tools or toolchain()
    out = paths.cache() / "kernbench" / _stage_key(tar, tools)
    if _staged(out):
        return out
    with lock(out.parent, log, what="kernbench tree"):
        if _staged(out):
            return out
        log(f"lab: configuring the kernbench tree (libiberty from {tar.name}) -> {out}")
        shutil.rmtree(out, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=".stage-", dir=out.parent))
        try:
            top = tar.name.removesuffix(".tar.xz")
            _run(["tar", "-xJf", str(tar), "--strip-components=1"] + [f"{top}/{m}" for m in TREE_MEMBERS],
                 tmp, "unpacking")
            (tmp / "build").mkdir()
            # /bin/sh, not bash, in the Makefile: the guest's shell is busybox's
            env = dict(os.environ, CONFIG_SHELL="/bin/sh", CC="gcc", LC_ALL="C")
            _run(["/bin/sh", "../libiberty/configure", "--quiet"], tmp / "build", "configure", env)
            # The trial build, in a copy, at the configured flags (optimisation selects headers), plus -MD.
            shutil.copytree(tmp / "build", tmp / "trial", symlinks=True)
            flags = _make_var(tmp / "build" / "Makefile", "CFLAGS")
            _run(["make", f"-j{os.cpu_count() or 1}", f"CFLAGS={flags} -MD"], tmp / "trial", "the trial build",
                 env)
            found = _headers_from_depfiles(tmp / "trial")
            if not found:
                raise RuntimeError("kernbench: the trial build named no system header")
            shutil.rmtree(tmp / "trial")
            (tmp / HEADERS_LIST).write_text("".join(h + "\n" for h in found))
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        for old in out.parent.iterdir():  # stages of an older tarball or toolchain
            if old.is_dir() and old != out:
                shutil.rmtree(old, ignore_errors=True)
    return out


def _make_var(makefile: Path, name: str) -> str:
    for line in makefile.read_text().splitlines():
        key, eq, val = line.partition("=")
        if eq and key.strip() == name:
            return val.strip()
    raise RuntimeError(f"kernbench: {makefile} sets no {name}")


def headers(staged: Path) -> list[str]:
    return (staged / HEADERS_LIST).read_text().split()


def inputs(lock, log=print) -> dict[str, str]:
    """Guest path -> host path of the extra (without libraries): the toolchain, the headers, the tree, the
    script. lock: as for stage."""
    files = toolchain()
    staged = stage(lock, log, tools=files)
    for h in headers(staged):
        files[h] = h
    for dirpath, _dirs, names in os.walk(staged):
        for n in names:
            host = Path(dirpath) / n
            rel = host.relative_to(staged)
            if rel.name != HEADERS_LIST or rel.parent != Path("."):
                files[f"{GUEST_TREE}/{rel}"] = str(host)
    files[GUEST_SCRIPT] = str(SCRIPT)
    return files
