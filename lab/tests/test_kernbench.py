# SPDX-License-Identifier: GPL-2.0-only
"""The kernbench benchmark without a guest: its script's output is what the figure reads (on a tiny tree, and on
the real configured libiberty tree when binutils-source is installed), a failed build gives no figure, the
"kernbench" image extra is added only to the boots that ask for it, and a bad image_extras is refused."""
import gzip
import os
import subprocess
from pathlib import Path

import pytest

from lab import bench, benchfile, host, image, kernbench, paths, setup

SCRIPT = paths.REPO / "lab" / "guest" / "kernbench.sh"
GUEST_SH = image.BUSYBOX if Path(image.BUSYBOX).exists() else None  # the guest's shell (busybox-static)


def figure():
    return benchfile.load_benchmark("kernbench").figures[0]


def tiny_tree(root: Path, fail: bool = False) -> Path:
    """A tree shaped like the staged one: sources beside a build/ folder whose Makefile builds them."""
    (root / "src").mkdir(parents=True)
    for i in range(3):
        (root / "src" / f"f{i}.c").write_text(f"int f{i}(void) {{ return {i}; }}\n")
    (root / "build").mkdir()
    rule = "\tfalse\n" if fail else "\tcp $< $@\n"
    (root / "build" / "Makefile").write_text("all: f0.o f1.o f2.o\n%.o: ../src/%.c\n" + rule)
    return root


def run_script(tree: Path, jobs: str, tmp: Path, shell: str | None = None):
    cmd = ([shell, "sh"] if shell else ["/bin/sh"]) + [str(SCRIPT), jobs, str(tree)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ, TMPDIR=str(tmp)))


@pytest.mark.parametrize("shell", [None, "busybox"], ids=["host-sh", "busybox-sh"])
def test_script_output_is_what_the_figure_reads(tmp_path, shell):
    """The script under the host's /bin/sh and under the guest's (busybox ash)."""
    if shell == "busybox":
        if GUEST_SH is None:
            pytest.skip("busybox-static missing (bin/lab setup)")
        shell = GUEST_SH
    tree = tiny_tree(tmp_path / "tree")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    r = run_script(tree, "2", scratch, shell)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "kernbench: make -j 2: 3 objects"
    secs = figure().parse(r.stdout)
    assert secs is not None and 0 <= secs < 60, r.stdout
    assert not list((tree / "build").glob("*.o"))  # built in a copy, not in the tree
    assert not list(scratch.iterdir())  # and the copy is gone


def test_failed_build_gives_no_figure_and_its_status(tmp_path):
    tree = tiny_tree(tmp_path / "tree", fail=True)
    r = run_script(tree, "2", tmp_path)
    assert r.returncode != 0
    assert "kernbench: make -j 2 failed with exit status" in r.stdout
    assert figure().parse(r.stdout) is None
    bad = run_script(tree, "0", tmp_path)
    assert bad.returncode == 2 and "usage" in bad.stderr


# --- the image extra

@pytest.fixture
def tiny_image(tmp_path, monkeypatch):
    """image.build on a tiny base and tiny overlays, in a cache of its own."""
    if not Path(image.BUSYBOX).exists():
        pytest.skip("busybox-static missing (bin/lab setup)")
    monkeypatch.setenv("LOCALITY_CACHE", str(tmp_path))
    monkeypatch.delenv(image.FLAVOUR_ENV, raising=False)
    monkeypatch.setattr(image, "collect_inputs", lambda include_scheduler=True: {
        "/bin/busybox": image.BUSYBOX, "/init": str(image.GUEST_DIR / "init")})
    real = image.overlay_inputs
    monkeypatch.setattr(image, "overlay_inputs", lambda name, log=print: (
        {kernbench.GUEST_SCRIPT: str(kernbench.SCRIPT)} if name == "kernbench" else real(name, log)))
    return tmp_path


def test_extra_is_added_only_when_asked_for(tiny_image):
    logs = []
    base = image.build(include_scheduler=False, log=logs.append)
    assert base.name.startswith("base-")
    with_extra = image.build(include_scheduler=False, log=logs.append, extras=["kernbench"])
    assert with_extra.name.startswith("kernbench-")
    (overlay,) = paths.images_dir().glob("overlay-kernbench-*.cpio.gz")
    assert with_extra.read_bytes() == base.read_bytes() + overlay.read_bytes()
    assert b"lab/kernbench.sh" in gzip.decompress(overlay.read_bytes())
    assert b"lab/kernbench.sh" not in gzip.decompress(base.read_bytes())
    # no extras, and a repeat of the same, change nothing; a second build reuses every file
    n = len(logs)
    assert image.build(include_scheduler=False, log=logs.append) == base
    assert image.build(include_scheduler=False, log=logs.append, extras=["kernbench", "kernbench"]) == with_extra
    assert len(logs) == n
    with pytest.raises(setup.SetupMissing, match="image extra 'compiler' is unknown; known: kernbench"):
        image.build(include_scheduler=False, log=logs.append, extras=["compiler"])


@pytest.mark.skipif(not all(os.path.exists(b) for b in image.SYSTEMD_BINARIES), reason="no systemd on this host")
def test_extra_follows_the_flavour(tiny_image, monkeypatch):
    base = image.build(include_scheduler=False, log=lambda s: None)
    monkeypatch.setenv(image.FLAVOUR_ENV, "systemd")
    both = image.build(include_scheduler=False, log=lambda s: None, extras=["kernbench"])
    assert both.name.startswith("systemd+kernbench-")
    (sd,) = paths.images_dir().glob("overlay-systemd-*.cpio.gz")
    (kb,) = paths.images_dir().glob("overlay-kernbench-*.cpio.gz")
    assert both.read_bytes() == base.read_bytes() + sd.read_bytes() + kb.read_bytes()


def test_bench_boots_carry_an_extra_only_for_a_benchmark_that_names_it():
    kb, hb = benchfile.load_benchmark("kernbench"), benchfile.load_benchmark("hackbench")
    assert bench.image_extras([hb]) == []
    assert bench.image_extras([hb, kb]) == ["kernbench"]
    assert [n for n in benchfile.known_benchmarks() if benchfile.load_benchmark(n).image_extras] == ["kernbench"]


@pytest.mark.parametrize("value, says", [
    ('["compiler"]', "field 'image_extras': 'compiler' is not an image extra (known: kernbench, perf, verifier)"),
    ('"kernbench"', "field 'image_extras' must be a list of strings"),
])
def test_bad_image_extras_are_refused(tmp_path, value, says):
    p = tmp_path / "kb.toml"
    text = (paths.REPO / "lab/benchmarks/kernbench.toml").read_text()
    p.write_text(text.replace('image_extras = ["kernbench"]', f"image_extras = {value}"))
    with pytest.raises(benchfile.BenchError) as e:
        benchfile.load_benchmark("kb", path=p)
    assert str(e.value) == f"{p}: {says}"


def test_host_bench_refuses_a_benchmark_with_an_extra():
    with pytest.raises(setup.SetupMissing, match="bench --host cannot run kernbench: .* only in the lab's guest"):
        host.check_programs([benchfile.load_benchmark("kernbench")], bench.WORKLOAD_PROGRAMS)


# --- the real tree (configured on this host, as an image build does; about 30 s the first time)

def have_tree() -> bool:
    try:
        kernbench.tarball()
        kernbench.toolchain()
    except setup.SetupMissing:
        return False
    return True


@pytest.mark.skipif(not have_tree(), reason="binutils-source or gcc missing (bin/lab setup)")
def test_real_tree_stages_and_builds_and_the_figure_reads_it(tmp_path):
    files = kernbench.inputs(image.cache_lock, log=lambda s: None)
    staged = kernbench.stage(image.cache_lock, log=lambda s: None)
    assert staged.parent == paths.cache() / "kernbench"
    for guest in ("/usr/bin/gcc", "/usr/bin/as", "/usr/bin/ar", "/usr/bin/make", kernbench.GUEST_SCRIPT,
                  f"{kernbench.GUEST_TREE}/build/Makefile", f"{kernbench.GUEST_TREE}/libiberty/hashtab.c",
                  "/usr/include/stdio.h"):
        assert guest in files, guest
    assert any(g.endswith("/cc1") for g in files)
    assert not any(g.startswith("/usr/include/") and g not in kernbench.headers(staged) for g in files)
    makefile = (staged / "build" / "Makefile").read_text()
    assert "\nSHELL = /bin/sh\n" in makefile  # busybox's sh in the guest, not bash
    # the staged tree is configured, not built
    assert not list((staged / "build").glob("*.o"))
    r = run_script(staged, str(os.cpu_count() or 1), tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "objects" in r.stdout and int(r.stdout.split(": ")[2].split()[0]) >= 60, r.stdout
    assert figure().parse(r.stdout) > 0
    assert not list((staged / "build").glob("*.o"))
    # staging again is a no-op
    assert kernbench.stage(image.cache_lock, log=lambda s: pytest.fail(f"staged again: {s}")) == staged


def test_perf_extra_carries_the_hosts_perf(monkeypatch):
    """The "perf" extra is the host's /usr/bin/perf (its libraries are added like any binary's); without
    it the error names the package and the setup command."""
    if os.path.exists(image.PERF_BINARY):
        assert image.overlay_inputs("perf") == {image.PERF_BINARY: image.PERF_BINARY}
    monkeypatch.setattr(image, "PERF_BINARY", "/nonexistent/perf")
    with pytest.raises(setup.SetupMissing, match="linux-perf.*bin/lab setup"):
        image.overlay_inputs("perf")
