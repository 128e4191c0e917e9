# SPDX-License-Identifier: GPL-2.0-only
"""The downloads half of `bin/lab setup` (bin/lab installs the Debian packages and the venv first).

The guest kernel is Debian's newest sched_ext kernel from trixie-backports, and netperf comes from bookworm's
non-free component. Neither may be installed on the host (installing from trixie would upgrade its libc), so both
are fetched with a private apt configuration under the cache (its own sources, lists and archives; the host's
apt state is only read) and unpacked with dpkg-deb. The kernel's config is checked for sched_ext before use.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import memmodel, paths

SOURCES = """\
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free
"""

REQUIRED_CONFIG = ("CONFIG_SCHED_CLASS_EXT=y", "CONFIG_DEBUG_INFO_BTF=y", "CONFIG_NUMA=y")
KERNEL_PKG = re.compile(r"^linux-binary-(\d+)\.(\d+)\.(\d+)\+deb(\d+)-amd64$")


class SetupMissing(Exception):
    """Raised when something setup provides is absent; the message tells the user to run bin/lab setup."""


def log(msg: str) -> None:
    print(f"lab setup: {msg}", file=sys.stderr, flush=True)


def _apt_dir() -> Path:
    return paths.cache() / "apt"


def _apt_opts() -> list[str]:
    d = _apt_dir()
    return [
        "-o", f"Dir::Etc::SourceList={d / 'sources.list'}",
        "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={d / 'lists'}",
        "-o", f"Dir::Cache={d / 'cache'}",
        "-o", "Dir::Etc::Preferences=/dev/null",
        "-o", f"Dir::Etc::PreferencesParts={d / 'prefs.d'}",
        "-o", "APT::Sandbox::User=root",
        "-q",
    ]


def _apt(*args: str, cwd: Path | None = None) -> str:
    r = subprocess.run(["apt-get", *_apt_opts(), *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"apt-get {' '.join(args)} failed:\n{r.stderr.strip()}")
    return r.stdout


def _apt_update() -> None:
    d = _apt_dir()
    for sub in ("lists/partial", "cache/archives/partial", "prefs.d"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "sources.list").write_text(SOURCES)
    log("reading trixie-backports and bookworm non-free package lists (private apt state in the cache)")
    _apt("update")


def newest_kernel(names: list[str]) -> str | None:
    """The newest generic amd64 kernel package among linux-binary-* names (cloud, rt and unsigned excluded)."""
    best, best_key = None, None
    for n in names:
        m = KERNEL_PKG.match(n.strip())
        if m:
            key = tuple(int(x) for x in m.groups())
            if best_key is None or key > best_key:
                best, best_key = n.strip(), key
    return best


def check_config(text: str) -> list[str]:
    """Required kernel options that the config lacks."""
    lines = set(text.splitlines())
    return [opt for opt in REQUIRED_CONFIG if opt not in lines]


def kernel_release() -> str:
    cur = paths.kernel_dir() / "current"
    if not cur.exists():
        raise SetupMissing("no guest kernel in the cache; run: bin/lab setup")
    rel = cur.read_text().strip()
    d = paths.kernel_dir() / rel
    if not (d / "vmlinuz").exists() or not (d / "config").exists():
        raise SetupMissing(f"the cached kernel {rel} is incomplete; run: bin/lab setup")
    return rel


def kernel_files() -> tuple[str, Path, Path]:
    rel = kernel_release()
    d = paths.kernel_dir() / rel
    return rel, d / "vmlinuz", d / "config"


def netperf_dir() -> Path:
    return paths.debs_dir() / "netperf"


def _download_and_extract(pkgs: list[str], dest: Path) -> None:
    dl = _apt_dir() / "download"
    shutil.rmtree(dl, ignore_errors=True)
    dl.mkdir(parents=True)
    _apt("download", *pkgs, cwd=dl)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for deb in sorted(dl.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    shutil.rmtree(dl, ignore_errors=True)


def setup_kernel(refresh: bool) -> str:
    try:
        if not refresh:
            rel = kernel_release()
            log(f"guest kernel: {rel} (cached; `bin/lab setup --refresh` looks for a newer one)")
            return rel
    except SetupMissing:
        pass
    _apt_update()
    names = _apt_pkgnames("linux-binary-")
    pkg = newest_kernel(names)
    if pkg is None:
        raise RuntimeError("trixie-backports lists no linux-binary-<version>-amd64 package")
    rel = pkg.removeprefix("linux-binary-")
    kdir = paths.kernel_dir() / rel
    if (kdir / "vmlinuz").exists() and (kdir / "config").exists():
        log(f"guest kernel: {rel} is the newest and already cached")
    else:
        log(f"downloading {pkg} and linux-base-{rel} (not installed: unpacked into {kdir})")
        raw = paths.kernel_dir() / f"{rel}.unpacked"
        _download_and_extract([pkg, f"linux-base-{rel}"], raw)
        mod = raw / "usr/lib/modules" / rel
        missing = check_config((mod / "config").read_text())
        if missing:
            shutil.rmtree(raw, ignore_errors=True)
            raise RuntimeError(f"kernel {rel} lacks {', '.join(missing)}; it cannot run sched_ext schedulers")
        kdir.mkdir(parents=True, exist_ok=True)
        shutil.copy(mod / "vmlinuz", kdir / "vmlinuz")
        shutil.copy(mod / "config", kdir / "config")
        shutil.rmtree(raw, ignore_errors=True)
        log(f"guest kernel {rel}: config has {', '.join(REQUIRED_CONFIG)}")
    (paths.kernel_dir() / "current").write_text(rel + "\n")
    return rel


def _apt_pkgnames(prefix: str) -> list[str]:
    r = subprocess.run(["apt-cache", *_apt_opts(), "pkgnames", prefix], capture_output=True, text=True, check=True)
    return r.stdout.split()


def setup_netperf() -> None:
    if (netperf_dir() / "usr/bin/netperf").exists():
        log("netperf: cached")
        return
    if not (_apt_dir() / "sources.list").exists():
        _apt_update()
    log("downloading netperf from bookworm non-free (unpacked, not installed)")
    _download_and_extract(["netperf"], netperf_dir())


def setup_memory_model() -> None:
    """The memory model's QEMU plugin, built for the installed QEMU's plugin API (lab/memmodel.py)."""
    log(f"memory model plugin: building for QEMU {'.'.join(map(str, memmodel.qemu_version()))} (cargo)")
    log(f"memory model plugin: {memmodel.build(log)}")


def main(refresh: bool = False) -> int:
    try:
        setup_kernel(refresh)
        setup_netperf()
        setup_memory_model()
    except (RuntimeError, subprocess.CalledProcessError, memmodel.MemoryModelError) as e:
        log(f"error: {e}")
        return 3
    log("done")
    return 0
