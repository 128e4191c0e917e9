# SPDX-License-Identifier: GPL-2.0-only
"""Machine files: every shipped one loads and is consistent; malformed ones name the file and the field."""
import pytest

from lab import machines, run


def write(tmp_path, name, body):
    p = tmp_path / f"{name}.toml"
    p.write_text(body)
    return p


GOOD = """
name = "{name}"
models = "m"
origin = "s"
sockets = 2
cores_per_socket = 2
threads_per_core = 2
memory_mb_per_node = 256
nodes = ["0-3", "4-7"]
distances = [[10, 20], [20, 10]]
llcs = ["0-3", "4-7"]
"""


def test_cpulist_roundtrip():
    assert machines.parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert machines.format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert machines.format_cpulist([5]) == "5"
    with pytest.raises(ValueError):
        machines.parse_cpulist("3-1")


@pytest.mark.parametrize("name", machines.known())
def test_shipped_machines_load(name):
    m = machines.load(name)
    assert m.nr_cpus == sum(len(n) for n in m.nodes)
    assert m.models and m.origin
    assert m.name in m.summary()


def test_required_machines_present():
    for name in ("numa2", "haswell2s", "numaq4", "epyc-l3numa", "spr-1n2llc"):
        assert name in machines.known()


def test_haswell2s_shape():
    m = machines.load("haswell2s")
    assert m.nr_cpus == 16 and len(m.nodes) == 2
    assert m.smt_groups()[0] == [0, 1]
    assert not m.needs_llc_override


def test_xeon_1n32_is_one_big_smt_llc():
    m = machines.load("xeon-1n32")
    assert m.nr_cpus == 32 and len(m.nodes) == 1 and len(m.llcs) == 1
    assert m.smt_groups()[0] == [0, 1] and len(m.smt_groups()) == 16
    assert not m.needs_llc_override


def test_spr_has_two_llcs_in_one_node():
    m = machines.load("spr-1n2llc")
    assert len(m.nodes) == 1 and len(m.llcs) == 2


def test_milan_has_several_llcs_in_each_node():
    m = machines.load("milan-2n8llc")
    assert len(m.nodes) == 2 and len(m.llcs) == 8 and m.nr_cpus == 32
    node_of = {c: i for i, n in enumerate(m.nodes) for c in n}
    for i, cpus in enumerate(m.llcs):
        assert len(cpus) == 4 and {node_of[c] for c in cpus} == {i // 4}
    assert not m.needs_llc_override


def test_qemu_args_for_numa2():
    args = machines.load("numa2").qemu_topology_args()
    assert "8,sockets=2,cores=4,threads=1" in args
    assert "node,nodeid=1,cpus=4-7,memdev=mem1" in args
    assert "dist,src=0,dst=1,val=32" in args


def test_good_file_loads(tmp_path):
    m = machines.load_file(write(tmp_path, "ok", GOOD.format(name="ok")))
    assert m.nr_cpus == 8 and m.llc_override() is None


@pytest.mark.parametrize("old,new,field", [
    ('nodes = ["0-3", "4-7"]', 'nodes = ["0-3", "4-6"]', "nodes"),          # CPU 7 in no node
    ('nodes = ["0-3", "4-7"]', 'nodes = ["0-4", "4-7"]', "nodes"),          # CPU 4 twice
    ('nodes = ["0-3", "4-7"]', 'nodes = ["0-3", "x"]', "nodes"),            # not a cpulist
    ("distances = [[10, 20], [20, 10]]", "distances = [[10, 20], [30, 10]]", "distances"),  # asymmetric
    ("distances = [[10, 20], [20, 10]]", "distances = [[10, 20]]", "distances"),             # not square
    ("distances = [[10, 20], [20, 10]]", "distances = [[10, 5], [5, 10]]", "distances"),     # below local
    ('llcs = ["0-3", "4-7"]', 'llcs = ["0-2", "3-7"]', "llcs"),             # splits an SMT pair
    ('llcs = ["0-3", "4-7"]', 'llcs = ["0-1", "2-5", "6-7"]', "llcs"),      # LLC spans two nodes
    ("sockets = 2", "sockets = 0", "sockets"),
    ("sockets = 2", 'sockets = "2"', "sockets"),
    ('models = "m"', "", "models"),                                          # missing
    ('origin = "s"', 'origin = "s"\ncolour = "blue"', "colour"),                 # unknown field
    ('name = "{name}"', 'name = "other"', "name"),                           # name != file name
    ('llcs = ["0-3", "4-7"]', 'llcs = ["0-1", "2-3", "4-5", "6-7"]', "llc_override_why"),
])
def test_malformed_file_names_field(tmp_path, old, new, field):
    body = GOOD.replace(old, new).format(name="bad")
    p = write(tmp_path, "bad", body)
    with pytest.raises(machines.MachineError) as e:
        machines.load_file(p)
    assert str(p) in str(e.value)
    assert f"field '{field}'" in str(e.value)


def test_not_toml(tmp_path):
    p = write(tmp_path, "bad", "name = [")
    with pytest.raises(machines.MachineError, match="not valid TOML"):
        machines.load_file(p)


def test_llc_override_declared(tmp_path):
    body = GOOD.format(name="ov").replace('llcs = ["0-3", "4-7"]', 'llcs = ["0-1", "2-3", "4-5", "6-7"]')
    body += 'llc_override_why = "the guest shows one L3 per socket"\n'
    m = machines.load_file(write(tmp_path, "ov", body))
    assert m.needs_llc_override
    assert m.llc_override() == {"llcs": ["0-1", "2-3", "4-5", "6-7"], "comment": "the guest shows one L3 per socket"}
    assert "LLC override" in m.summary()
    # The guest is still expected to show QEMU's per-socket L3s.
    assert m.guest_topology().llcs == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_unknown_machine_lists_known():
    with pytest.raises(machines.UnknownMachine) as e:
        machines.load("pdp11")
    assert "numa2" in str(e.value)


def test_expected_topology_text_numa2():
    text = run.expected_topology_text(machines.load("numa2"))
    assert text.splitlines() == [
        "node 0 0-3 10 32", "node 1 4-7 32 10",
        "llc 0-3", "llc 4-7",
        "smt 0", "smt 1", "smt 2", "smt 3", "smt 4", "smt 5", "smt 6", "smt 7",
    ]
