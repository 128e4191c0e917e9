# SPDX-License-Identifier: GPL-2.0-only
"""Machine and benchmark files: unknown fields and out-of-range values are refused, naming the file, the field
and the bounds."""
import subprocess

import pytest

from lab import benchfile, machines, paths

LAB = str(paths.REPO / "bin" / "lab")
NUMA2 = (paths.REPO / "lab/machines/numa2.toml").read_text()
HACKBENCH = (paths.REPO / "lab/benchmarks/hackbench.toml").read_text()


def machine(tmp_path, text, name="m"):
    p = tmp_path / f"{name}.toml"
    p.write_text(text.replace('name = "numa2"', f'name = "{name}"'))
    return p


@pytest.mark.parametrize("extra, field, says", [
    ("boot_timeout_s = 0", "boot_timeout_s", "0 is out of range 10..3600 seconds"),
    ("boot_timeout_s = 100000", "boot_timeout_s", "100000 is out of range 10..3600 seconds"),
    ("boot_timeout_s = true", "boot_timeout_s", "must be int, got bool"),
    ("boot_timout_s = 300", "boot_timout_s", "unknown field (known: "),
])
def test_machine_fields(tmp_path, extra, field, says):
    p = machine(tmp_path, NUMA2.replace("\n[memory]", f"\n{extra}\n\n[memory]", 1))  # a top-level field
    with pytest.raises(machines.MachineError) as e:
        machines.load_file(p)
    assert str(e.value).startswith(f"{p}: field '{field}': ") and says in str(e.value)


def test_machine_cpu_limit_is_stated(tmp_path):
    text = NUMA2.replace("cores_per_socket = 4", "cores_per_socket = 64").replace("threads_per_core = 1",
                                                                                "threads_per_core = 2")
    with pytest.raises(machines.MachineError, match=r"= 256 CPUs; the lab boots at most 255 \(QEMU's pc machine\)"):
        machines.load_file(machine(tmp_path, text))


def test_machine_memory_beyond_the_host(tmp_path, monkeypatch):
    m = machines.load("numa2")
    monkeypatch.setattr(machines, "host_memory_mb", lambda: 2048)
    with pytest.raises(machines.MachineError) as e:
        machines.check_host(m)
    assert str(e.value).startswith(f"{m.path}: field 'memory_mb_per_node': 2 nodes x 1024 MB = 2048 MB is more "
                                   "than this host can give a guest (1024 MB")
    monkeypatch.setattr(machines, "host_memory_mb", lambda: 4096)
    machines.check_host(m)


def test_bin_lab_names_the_machine_field(tmp_path):
    p = machine(tmp_path, NUMA2.replace("\n[memory]", "\nboot_timeout_s = -5\n\n[memory]", 1))
    r = subprocess.run([LAB, "run", "--machine", str(p), "--", "true"], capture_output=True, text=True)
    assert r.returncode == 7
    assert r.stderr.strip() == (f"lab: error: malformed machine file: {p}: field 'boot_timeout_s': -5 is out of "
                                "range 10..3600 seconds")


def bench_file(tmp_path, text):
    p = tmp_path / "hb.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("edit, says", [
    (lambda t: t + 'timeout = 10\n', "field 'timeout' is unknown (known: "),
    (lambda t: t.replace('mean = "amean"', 'mean = "amean"\nhigher_is_beter = true'),
     "figure[0]: field 'higher_is_beter' is unknown (known: "),
    (lambda t: t.replace("timeout_s = 600", "timeout_s = 0"), "field 'timeout_s' must be a number of seconds in "
                                                              "1..3600, got 0"),
    (lambda t: t.replace("timeout_s = 600", "timeout_s = 99999"), "1..3600, got 99999"),
    (lambda t: t.replace("timeout_s = 600", 'timeout_s = "600"'), "1..3600, got '600'"),
    (lambda t: t.replace("loops = 500", "loops = [500]"), "field 'params.loops' must be a string, number"),
    (lambda t: t.replace("groups = [1, 4, 8]", "groups = [1, {a = 1}]"), "field 'sweep.groups' must be a list"),
    (lambda t: t.replace("groups = [1, 4, 8]", "groups = " + str(list(range(300)))), "field 'sweep': 1200 cases; "
                                                                                     "at most 1000"),
])
def test_benchmark_fields(tmp_path, edit, says):
    p = bench_file(tmp_path, edit(HACKBENCH))
    with pytest.raises(benchfile.BenchError) as e:
        benchfile.load_benchmark("hb", path=p)
    assert str(e.value).startswith(f"{p}: ") and says in str(e.value)


def test_every_shipped_file_is_valid():
    for name in machines.known():
        machines.load(name)
    for name in benchfile.known_benchmarks():
        benchfile.load_benchmark(name)
    assert benchfile.ablation_mechanisms()


def test_ablation_file_fields(tmp_path):
    p = tmp_path / "ablation.toml"
    p.write_text('[[mechanism]]\nname = "steal"\noff = "--no-steal"\nwhy = "typo for what"\n')
    with pytest.raises(benchfile.BenchError, match=r"mechanism\[0\]: field 'why' is unknown"):
        benchfile.ablation_mechanisms(p)
