# SPDX-License-Identifier: GPL-2.0-only
"""The guest image: an initramfs (cpio newc, gzip) with busybox, the schedulers, the workloads and the shared
libraries `ldd` lists for them, plus the guest kernel's config (libbpf resolves __kconfig externs from
/boot/config-<release>; Debian's kernel has no /proc/config.gz).

The image is content-addressed: its name is a hash of every input (file paths, sizes, mtimes, and the guest
scripts' text), so it is rebuilt exactly when an input changed. Each run appends a tiny uncompressed cpio with
that run's job (lab/run.py); the kernel unpacks concatenated archives in order.

The cache may be shared by concurrent runs (LOCALITY_CACHE, CI): an image is built under a lock on the images
folder, into a temporary file of its own and renamed into place, so a reader sees a whole image or none; other
clones' images are left alone until unused for IMAGE_KEEP_S.

Flavours (LOCALITY_IMAGE_FLAVOUR, default "base"): a flavour is the base image followed by an overlay archive of
its own, which the kernel unpacks over it; the base image itself is the same file whatever the flavour. "systemd"
(lab/guest/systemd/) replaces /init with one that boots the host's systemd as PID 1, for the service test
(lab/tests/test_service_lab.py).

Extras (EXTRAS): overlays a boot gets only when it asks for them (a benchmark's image_extras; `bin/lab run
--extra`), after the flavour's, so that every other boot keeps the base image's size. "kernbench" carries gcc,
binutils, make and a C tree configured on the host (lab/kernbench.py). "perf" carries Debian's perf, to profile
where the guest's CPU time goes (`perf record -a -e cpu-clock`: timer sampling works under TCG, which has no PMU).
"verifier" carries verifstats.so (lab/guest/verifstats.c, built here with the host's gcc), which `bin/lab
verifier` preloads into scx_locality to read the kernel verifier's statistics of each program (lab/verifier.py).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import kernbench, paths, setup

GUEST_DIR = paths.REPO / "lab" / "guest"

# Workload binaries taken from the host's Debian packages (bin/lab setup installs them).
HOST_BINARIES = [
    "/usr/bin/hackbench",
    "/usr/bin/stress-ng",
    "/usr/bin/numactl",
    "/usr/bin/sysbench",
    "/usr/bin/migratepages",
    # util-linux and procps versions: bookworm's busybox-static has no chrt or pgrep
    "/usr/bin/chrt",
    "/usr/bin/taskset",
    "/usr/bin/renice",
    "/usr/bin/pgrep",
    "/usr/bin/setpriv",
    # dbench: tbench and its server (lab/benchmarks/tbench.toml)
    "/usr/bin/tbench",
    "/usr/bin/tbench_srv",
]
# Data files from the host's Debian packages, at the same path in the guest: tbench's load file (its default
# path; 26 MB of guest memory, 2.7 MB of the gzipped image).
HOST_DATA_FILES = [
    "/usr/share/dbench/client.txt",
]
BUSYBOX = "/bin/busybox"


def scheduler_binary() -> Path:
    """The scx_locality the guest gets; LOCALITY_SCHED_BIN pins another build (e.g. for a long soak)."""
    pinned = os.environ.get("LOCALITY_SCHED_BIN")
    if pinned:
        return Path(pinned)
    return paths.REPO / "scheduler" / "target" / "release" / "scx_locality"


BASELINE_ENV = "LOCALITY_BASELINE_BIN"
BASELINE_NAME = "scx_locality_baseline"


def baseline_binary() -> Path | None:
    """The second scx_locality build of a before/after comparison (LOCALITY_BASELINE_BIN), if one is set."""
    path = os.environ.get(BASELINE_ENV)
    return Path(path) if path else None


def check_baseline() -> None:
    """Raise SetupMissing unless LOCALITY_BASELINE_BIN names an executable file."""
    b = baseline_binary()
    if b is None:
        raise setup.SetupMissing(f"{BASELINE_NAME} runs the build named by {BASELINE_ENV}, which is not set "
                                 f"(e.g. {BASELINE_ENV}=/tmp/before/scx_locality)")
    if not (b.is_file() and os.access(b, os.X_OK)):
        raise setup.SetupMissing(f"{BASELINE_ENV}={b} is not an executable file")


def peer_bin_dir() -> Path:
    """Published schedulers built by the bench's peer builder (cargo install --root), if any."""
    return paths.cache() / "peers" / "bin"


def workloads_bin_dir() -> Path:
    return paths.REPO / "workloads" / "build"


def build_scheduler(quiet: bool = False) -> Path:
    """cargo build --release (a no-op in about a second when nothing changed)."""
    manifest = paths.REPO / "scheduler" / "Cargo.toml"
    if not manifest.exists():
        raise FileNotFoundError(f"{manifest} is missing")
    if not quiet:
        print("lab: building scx_locality (cargo build --release)", file=sys.stderr, flush=True)
    # Run inside scheduler/ so cargo reads scheduler/.cargo/config.toml (it points BPF_CLANG at clang-N).
    r = subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=manifest.parent)
    if r.returncode != 0:
        raise BuildFailed(f"building scx_locality failed (cargo exit {r.returncode}); its errors are above")
    return scheduler_binary()


class BuildFailed(Exception):
    pass


def _elf_libs(binary: str) -> list[str]:
    """Absolute paths of the shared libraries (and the loader) a dynamic binary needs; [] for static ones."""
    r = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if r.returncode != 0:  # "not a dynamic executable"
        return []
    libs = []
    for line in r.stdout.splitlines():
        line = line.strip()
        if "=>" in line:
            target = line.split("=>", 1)[1].strip().split(" ")[0]
            if target.startswith("/"):
                libs.append(target)
            elif "not found" in line:
                raise RuntimeError(f"{binary}: shared library missing on the host: {line}")
        elif line.startswith("/"):
            libs.append(line.split(" ")[0])
    return libs


def collect_inputs(include_scheduler: bool = True) -> dict[str, str]:
    """Map of guest path -> host path for every file the image carries (not yet with libraries)."""
    files: dict[str, str] = {}
    if not os.path.exists(BUSYBOX):
        raise setup.SetupMissing(f"{BUSYBOX} is missing; run: bin/lab setup")
    files["/bin/busybox"] = BUSYBOX
    for b in HOST_BINARIES + HOST_DATA_FILES:
        if not os.path.exists(b):
            raise setup.SetupMissing(f"{b} is missing; run: bin/lab setup")
        files[b] = b
    nd = setup.netperf_dir() / "usr" / "bin"
    for b in ("netperf", "netserver"):
        if not (nd / b).exists():
            raise setup.SetupMissing("netperf is not in the cache; run: bin/lab setup")
        files[f"/usr/bin/{b}"] = str(nd / b)
    if include_scheduler:
        files["/usr/local/bin/scx_locality"] = str(scheduler_binary())
    b = baseline_binary()
    if b is not None and b.is_file():
        files[f"/usr/local/bin/{BASELINE_NAME}"] = str(b)
    for d in (peer_bin_dir(), workloads_bin_dir()):
        if d.is_dir():
            for f in sorted(d.iterdir()):
                if f.is_file() and os.access(f, os.X_OK):
                    files[f"/usr/local/bin/{f.name}"] = str(f)
    rel, _, config = setup.kernel_files()
    files[f"/boot/config-{rel}"] = str(config)
    files["/init"] = str(GUEST_DIR / "init")
    files["/lab/lib.sh"] = str(GUEST_DIR / "lib.sh")
    for script in sorted((paths.REPO / "lab" / "reliability").glob("*.sh")):
        files[f"/lab/reliability/{script.name}"] = str(script)
    return files


def with_libraries(files: dict[str, str]) -> dict[str, str]:
    out = dict(files)
    for host in list(files.values()):
        if os.access(host, os.X_OK):
            for lib in _elf_libs(host):
                out.setdefault(lib, lib)
                real = os.path.realpath(lib)
                out.setdefault(real, real)
    return out


# Bump when build() changes what it makes from the same inputs (2: "/" 0755, /tmp 1777).
IMAGE_FORMAT = 2


def input_hash(files: dict[str, str], fmt: str = f"format {IMAGE_FORMAT}") -> str:
    h = hashlib.sha256()
    h.update(f"{fmt}\n".encode())
    for guest, host in sorted(files.items()):
        st = os.stat(host)
        h.update(f"{guest}\0{host}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


# An image unused (not built or reused, which touches it) for this long is removed when another is built.
IMAGE_KEEP_S = 2 * 86400


@contextlib.contextmanager
def cache_lock(folder: Path, log=print, what: str = "image build"):
    """An exclusive flock on folder/.lock: one build at a time per cache folder, whatever the process."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"lab: waiting for another run's {what} in {folder}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _reuse(path: Path) -> bool:
    """Mark a cached image as just used (its mtime), so that no concurrent build prunes it; False if absent."""
    try:
        os.utime(path)
        return True
    except FileNotFoundError:
        return False


def build(include_scheduler: bool = True, log=print, extras=()) -> Path:
    """The image for the current inputs: the cached one if nothing changed, else a freshly built one.
    extras: names of EXTRAS (a benchmark's image_extras) whose overlays follow the base image and the flavour's."""
    files = with_libraries(collect_inputs(include_scheduler))
    base = _cached("base", files, input_hash(files), _pack, log)
    name = flavour()
    layers = ([] if name == "base" else [name]) + check_extras(extras)
    return base if not layers else _layered(layers, base, log)


def _cached(prefix: str, files: dict[str, str], digest: str, pack, log) -> Path:
    """images/PREFIX-DIGEST.cpio.gz: reused if present, else made by pack(files, fh) under the cache lock.
    PREFIX must not be another prefix followed by "-" (_prune globs PREFIX-*)."""
    out = paths.images_dir() / f"{prefix}-{digest}.cpio.gz"
    if _reuse(out):
        return out
    with cache_lock(out.parent, log):
        if _reuse(out):  # built by another run while this one waited for the lock
            return out
        log(f"lab: building guest image ({len(files)} files) -> {out}")
        fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        tmp_out = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fh:
                pack(files, fh)
            tmp_out.chmod(0o644)
            tmp_out.rename(out)  # atomic: readers see the whole image or none
        finally:
            tmp_out.unlink(missing_ok=True)
        _prune(out.parent, keep=out, prefix=prefix)
    return out


def _pack(files: dict[str, str], fh) -> None:
    """Write the gzipped cpio of files (guest path -> host path) with busybox's applets and /etc to fh."""
    with tempfile.TemporaryDirectory(prefix="lab-image-") as tmp:
        root = Path(tmp)
        # TemporaryDirectory is 0700: as the guest's "/" that would lock every other user out
        root.chmod(0o755)
        for d in ("bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin", "proc", "sys", "dev", "tmp", "run",
                  "root", "etc", "lab", "boot", "mnt"):
            (root / d).mkdir(parents=True, exist_ok=True)
        for guest, host in files.items():
            dest = root / guest.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(host, dest, follow_symlinks=True)
        r = subprocess.run([str(root / "bin/busybox"), "--list"], capture_output=True, text=True, check=True)
        for applet in r.stdout.split():
            # busybox lists itself; linking it onto itself breaks init (error -40, ELOOP).
            if applet == "busybox":
                continue
            link = root / "bin" / applet
            if not link.exists() and not (root / "usr/bin" / applet).exists():
                link.symlink_to("busybox")
        os.chmod(root / "init", 0o755)
        os.chmod(root / "tmp", 0o1777)
        (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n")
        (root / "etc/group").write_text("root:x:0:\nnogroup:x:65534:\n")
        (root / "etc/hosts").write_text("127.0.0.1 localhost lab\n::1 localhost\n")
        (root / "etc/nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files\n")
        (root / "etc/services").write_text("netperf 12865/tcp\n")
        _write_cpio_gz(root, fh)


def _write_cpio_gz(root: Path, fh) -> None:
    """Everything under root as a gzipped cpio (newc, owned by root) into fh."""
    find = subprocess.Popen(["find", "."], cwd=root, stdout=subprocess.PIPE)
    cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet", "-R", "0:0"], cwd=root,
                            stdin=find.stdout, stdout=subprocess.PIPE)
    gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=fh)
    find.stdout.close()
    cpio.stdout.close()
    if gz.wait() or cpio.wait() or find.wait():
        raise RuntimeError("packing the guest image failed")


def _prune(folder: Path, keep: Path, prefix: str = "base") -> None:
    """Remove PREFIX images unused for IMAGE_KEEP_S and the temporary files of killed builds; called under
    cache_lock (so no build is under way). Images of other clones or scheduler builds sharing the cache stay
    while used."""
    now = time.time()
    for old in folder.glob(f".{prefix}-*.tmp"):
        old.unlink(missing_ok=True)
    for old in folder.glob(f"{prefix}-*.cpio.gz"):
        try:
            if old != keep and now - old.stat().st_mtime > IMAGE_KEEP_S:
                old.unlink()
        except FileNotFoundError:
            pass


FLAVOUR_ENV = "LOCALITY_IMAGE_FLAVOUR"
FLAVOURS = ("base", "systemd")
SYSTEMD_GUEST_DIR = GUEST_DIR / "systemd"
SERVICES_DIR = paths.REPO / "services"
# The host's systemd (Debian 12: 252), at the paths its units and its ldd output name.
SYSTEMD_BINARIES = ["/lib/systemd/systemd", "/lib/systemd/systemd-journald", "/bin/systemctl", "/bin/journalctl"]
SYSTEMD_HOST_UNITS = ["systemd-journald.service", "systemd-journald.socket"]
SYSTEMD_UNIT_DIR = "/lib/systemd/system"
# Bump when _pack_overlay changes what it makes from the same inputs.
OVERLAY_FORMAT = 1


# Extras: overlays that only the boots asking for them get (a benchmark's image_extras, lab/benchfile.py), so
# that every other boot keeps the base image's size and boot time. Names are lower-case letters and digits (the
# cached files are NAME-DIGEST.cpio.gz and overlay-NAME-DIGEST.cpio.gz; see _cached).
# "kernbench": gcc, binutils, make and a configured C tree to build (lab/kernbench.py).
# "perf": Debian's perf (package linux-perf), for kernel profiles of a run.
# "verifier": verifstats.so, preloaded into scx_locality by bin/lab verifier (lab/verifier.py).
EXTRAS = ("kernbench", "perf", "verifier")
PERF_BINARY = "/usr/bin/perf"
VERIFSTATS_SOURCE = GUEST_DIR / "verifstats.c"
VERIFSTATS_GUEST = "/usr/local/lib/verifstats.so"


def build_verifstats(log=print) -> Path:
    """lab/guest/verifstats.c built with the host's gcc into CACHE/verifier/verifstats-DIGEST.so (DIGEST: of the
    source), once per source; the guest runs the host's libc, as it does for every host binary."""
    src = VERIFSTATS_SOURCE.read_bytes()
    out = paths.cache() / "verifier" / f"verifstats-{hashlib.sha256(src).hexdigest()[:16]}.so"
    if out.exists():
        return out
    with cache_lock(out.parent, log, what="verifstats build"):
        if out.exists():
            return out
        fd, tmp_name = tempfile.mkstemp(prefix=".verifstats-", suffix=".so", dir=out.parent)
        os.close(fd)
        try:
            r = subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", tmp_name, str(VERIFSTATS_SOURCE),
                                "-ldl"], capture_output=True, text=True)
            if r.returncode != 0:
                raise BuildFailed(f"building {VERIFSTATS_SOURCE} failed (gcc exit {r.returncode}): {r.stderr}")
            os.chmod(tmp_name, 0o755)
            os.rename(tmp_name, out)
        finally:
            Path(tmp_name).unlink(missing_ok=True)
    return out


def check_extras(extras) -> list[str]:
    """extras sorted and without repeats; SetupMissing naming an unknown one."""
    out = sorted(set(extras))
    for e in out:
        if e not in EXTRAS:
            raise setup.SetupMissing(f"image extra {e!r} is unknown; known: {', '.join(EXTRAS)}")
    return out


def flavour() -> str:
    """The image flavour runs boot: LOCALITY_IMAGE_FLAVOUR, "base" when unset or empty."""
    name = os.environ.get(FLAVOUR_ENV) or "base"
    if name not in FLAVOURS:
        raise setup.SetupMissing(f"{FLAVOUR_ENV}={name!r}: expected one of {', '.join(FLAVOURS)}")
    return name


def overlay_inputs(name: str, log=print) -> dict[str, str]:
    """Guest path -> host path of a flavour's or an extra's overlay (without libraries). "systemd": systemd,
    journald, systemctl, journalctl and journald's units from the host; the lab's /init, minimal units,
    /etc/os-release and guest scripts (lab/guest/systemd/); the repo's services/ files under /lab/services, for
    the job to install. "kernbench": see lab/kernbench.py. "perf": /usr/bin/perf. "verifier": verifstats.so."""
    if name == "kernbench":
        return kernbench.inputs(cache_lock, log)
    if name == "verifier":
        return {VERIFSTATS_GUEST: str(build_verifstats(log))}
    if name == "perf":
        if not os.path.exists(PERF_BINARY):
            raise setup.SetupMissing(f"{PERF_BINARY} is missing (Debian package linux-perf); run: bin/lab setup")
        return {PERF_BINARY: PERF_BINARY}
    if name != "systemd":
        raise ValueError(f"flavour {name!r} has no overlay")
    files: dict[str, str] = {}
    for host in SYSTEMD_BINARIES + [f"{SYSTEMD_UNIT_DIR}/{u}" for u in SYSTEMD_HOST_UNITS]:
        if not os.path.exists(host):
            raise setup.SetupMissing(f"{host} is missing: the systemd image flavour needs the host's systemd")
        files[host] = host
    for f in sorted(SYSTEMD_GUEST_DIR.iterdir()):
        if f.name == "init":
            files["/init"] = str(f)
        elif f.suffix in (".target", ".service"):
            files[f"{SYSTEMD_UNIT_DIR}/{f.name}"] = str(f)
        elif f.name == "os-release":
            files["/etc/os-release"] = str(f)
        elif f.is_file():
            files[f"/lab/systemd/{f.name}"] = str(f)
    for f in sorted(SERVICES_DIR.iterdir()):
        if f.is_file():
            files[f"/lab/services/{f.name}"] = str(f)
    return files


def _pack_overlay(files: dict[str, str], fh) -> None:
    """Write the gzipped cpio of the systemd flavour's overlay: its files and their folders only."""
    _pack_files(files, fh, _systemd_finish)


def _systemd_finish(root: Path) -> None:
    os.chmod(root / "init", 0o755)
    (root / "etc/hostname").write_text("lab\n")
    (root / "etc/machine-id").write_text("")  # /init writes this boot's


def _pack_files(files: dict[str, str], fh, finish=None) -> None:
    """Write the gzipped cpio of files (guest path -> host path, with their modes and mtimes) and their folders
    only; finish(root), if given, adds to the tree first."""
    with tempfile.TemporaryDirectory(prefix="lab-overlay-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)  # the folders of "/" it holds are unpacked over the base image's
        for guest, host in files.items():
            dest = root / guest.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(host, dest, follow_symlinks=True)
        if finish is not None:
            finish(root)
        _write_cpio_gz(root, fh)


def _concat(parts: dict[str, str], fh) -> None:
    for host in parts.values():
        with open(host, "rb") as src:
            shutil.copyfileobj(src, fh, 1 << 20)


def _layered(names: list[str], base: Path, log) -> Path:
    """The base image followed by the overlays of names (a flavour, then extras; gzip members may follow each
    other in an initramfs; the later one wins), cached as NAME[+NAME...]-DIGEST.cpio.gz. Each overlay is cached
    on its own (overlay-NAME-...), so that a new base image (a new scheduler build) costs a copy, not a rebuild.
    An overlay is self-contained: it carries its binaries' libraries even where the base image has the same host
    files."""
    parts = {"base": str(base)}
    for name in names:
        files = with_libraries(overlay_inputs(name, log))
        pack = _pack_overlay if name == "systemd" else _pack_files
        overlay = _cached(f"overlay-{name}", files, input_hash(files, f"{name} overlay {OVERLAY_FORMAT}"),
                          pack, log)
        parts[name] = str(overlay)
    digest = hashlib.sha256("\0".join(Path(p).name for p in parts.values()).encode()).hexdigest()[:16]
    return _cached("+".join(names), parts, digest, _concat, log)


def job_archive(files: dict[str, bytes], dest: Path) -> Path:
    """A small uncompressed cpio with the run's job files (guest path -> content)."""
    with tempfile.TemporaryDirectory(prefix="lab-job-") as tmp:
        root = Path(tmp)
        for guest, content in files.items():
            p = root / guest.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(content)
            p.chmod(0o755)
        listing = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
        with open(dest, "wb") as fh:
            subprocess.run(["cpio", "-o", "-H", "newc", "--quiet", "-R", "0:0"], cwd=root, input=listing,
                           stdout=fh, check=True)
    return dest
