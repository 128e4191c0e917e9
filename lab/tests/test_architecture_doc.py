# SPDX-License-Identifier: GPL-2.0-only
"""ARCHITECTURE.md and the header comment of scheduler/src/bpf/main.bpf.c say what the code is: the same BPF
units as scheduler/build.rs builds, and no function that does not exist.
Pure text parsing, no build and no lab; each check is a function of the texts, so that a scratch script can
run it on an older ARCHITECTURE.md (`git show REV:ARCHITECTURE.md`).

Parsing rules:

- The units build.rs builds: the file named in `.enable_skel("src/bpf/NAME.bpf.c", ...)` (main.bpf.c, the
  skeleton's source) plus every "src/bpf/NAME.bpf.c" string literal in `const UNITS: &[&str] = &[ ... ];`.
- ARCHITECTURE.md's unit table: in the section "## The BPF side", every table row (a line starting with `|`)
  whose first cell is one backticked `NAME.bpf.c`.
- main.bpf.c's unit list: in its first /* ... */ comment after the SPDX line, every line ` *` + at least
  two spaces + `NAME.bpf.c` (the indented list "place.bpf.c  the order of ..."). main.bpf.c itself is
  "this file" there, so the list must name every other unit.
- A function ARCHITECTURE.md cites: a snake_case identifier with at least one underscore, either (1) the
  whole of a backtick span outside code blocks (`numa_place_exec`, or `numa_place_exec()`), or (2) any word
  inside a fenced code block (the flow diagrams), except a word that is part of a file name or path (next to
  `/`, or `.` followed by a letter: guest_script.py), follows a `.` (ops.select_cpu, the ops callbacks), is
  part of a --flag (next to `-`), or is a man page reference (move_pages(2)). Words without an underscore
  (main, sync, plan) and wildcards (idle_*) are not checked. The few cited names that are not functions (a
  variable, a map, a /proc file, a string) are listed in NOT_FUNCTIONS with what they are; each must occur
  in scheduler/src, and each must still be cited (so the list does not outlive the doc).
- The rules by name: the table after the line starting "The rules by name" (its rows start with `|`); the
  backticked names of a row's first cell are rule names (place_exec, wake_follow, ...), not functions. Each must
  be a word of scheduler/src/bpf (a comment or code names it), and a citation of it elsewhere in ARCHITECTURE.md
  is not taken for a function.
- A function definition under scheduler/src: C (*.c, *.h): a line starting at column 0 with a type and then
  `NAME(`, whose parameter list (balanced parentheses, possibly over several lines) is followed by `{`
  (a prototype ends in `;` and does not count), or `#define NAME(`; Rust (*.rs): a line `fn NAME`, optionally
  after `pub`, `pub(crate)`, `const`, `async`, `unsafe`.
  So a name that exists but is the wrong one (a real function cited for another's job) is not caught.
- The heartbeat period the balance-pass diagram states ("heartbeat timer, every N ms") is cli.rs's default of
  --heartbeat-us, and the balance pass's "(--numa-interval-ms, N ms by default)" that of --numa-interval-ms.
"""
import re

from lab import paths

REPO = paths.REPO
SRC = REPO / "scheduler" / "src"

# Names cited in ARCHITECTURE.md that look like functions and are not: what each one is.
NOT_FUNCTIONS = {
    "nr_over_llc": "pull.bpf.c: count of overloaded CPUs per LLC",
    "nr_over_node": "pull.bpf.c: count of overloaded CPUs per node",
    "numa_interval_ns": "numa.bpf.c rodata: the balance pass's period",
    "proc_home": "home.bpf.c map: tgid -> home node",
    "thread_home": "home.bpf.c map: tid -> home node",
    "numa_maps": "/proc/PID/numa_maps",
    "clear_refs": "/proc/PID/clear_refs",
    "interval_ms": "explain's request argument",
    "explain_top": "explain --top's scx_stats target",
    "scx_locality": "the binary",
}

UNIT = r"[a-z0-9_]+\.bpf\.c"
IDENT = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
# a word in a diagram: not part of a path, a file name, a flag, ops.NAME, nor NAME(2)
DIAGRAM_WORD = re.compile(rf"(?<![\w./-])({IDENT})(?!\w|\.\w|/|-|\(\d)")


def built_units(build_rs: str) -> set[str]:
    """The BPF units build.rs compiles and links: the skeleton's source and UNITS."""
    skel = re.findall(rf'\.enable_skel\(\s*"src/bpf/({UNIT})"', build_rs)
    m = re.search(r"const UNITS: &\[&str\] = &\[(.*?)\];", build_rs, re.S)
    assert skel and m, "build.rs: no .enable_skel(...) or no const UNITS: the parser needs updating"
    return set(skel) | set(re.findall(rf'"src/bpf/({UNIT})"', m.group(1)))


def doc_table_units(arch: str) -> set[str]:
    """The units in ARCHITECTURE.md's table of the BPF side."""
    m = re.search(r"^## The BPF side.*?(?=^## )", arch, re.M | re.S)
    assert m, 'ARCHITECTURE.md: no section "## The BPF side"'
    return set(re.findall(rf"^\|\s*`({UNIT})`\s*\|", m.group(0), re.M))


def header_units(main_c: str) -> set[str]:
    """The units listed in main.bpf.c's header comment."""
    header = next((c for c in re.findall(r"/\*.*?\*/", main_c, re.S) if "SPDX-License-Identifier" not in c), None)
    assert header, "main.bpf.c: no header comment"
    return set(re.findall(rf"^ \*  +({UNIT})\s", header, re.M))


def rule_names(arch: str) -> set[str]:
    """The rule names of ARCHITECTURE.md's table "The rules by name" (see the module's docstring)."""
    m = re.search(r"^The rules by name[^|]*?\n\n((?:\|[^\n]*\n)+)", arch, re.M)
    assert m, 'ARCHITECTURE.md: no table after "The rules by name"'
    names = set()
    for row in m.group(1).splitlines():
        first = row.split("|")[1]
        names |= set(re.findall(rf"`({IDENT})`", first))
    return names


def cited_functions(arch: str) -> set[str]:
    """Identifiers that ARCHITECTURE.md cites as functions (see the module's docstring)."""
    names = set()
    for block in FENCE.findall(arch):
        names |= set(DIAGRAM_WORD.findall(block))
    for span in re.findall(r"`([^`\n]+)`", FENCE.sub("", arch)):
        if m := re.fullmatch(rf"({IDENT})(?:\(\))?", span):
            names.add(m.group(1))
    return names


def source_texts() -> dict[str, str]:
    return {str(p.relative_to(SRC)): p.read_text(errors="replace")
            for p in sorted(SRC.rglob("*")) if p.suffix in (".c", ".h", ".rs") and p.is_file()}


def balanced_then_brace(text: str, open_paren: int) -> bool:
    """Whether the parenthesis at @open_paren closes and is followed (after spaces) by `{`."""
    depth = 0
    for i in range(open_paren, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[i + 1:].lstrip().startswith("{")
    return False


def defined_functions(sources: dict[str, str]) -> set[str]:
    """Every function (and function-like macro) defined in the sources."""
    names = set()
    c_def = re.compile(r"^[A-Za-z_][^;{}()=\n]*?\b([A-Za-z_]\w*)\s*\(", re.M)
    rust_fn = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?(?:(?:const|async|unsafe)[ \t]+)*fn[ \t]+(\w+)", re.M)
    for path, text in sources.items():
        if path.endswith(".rs"):
            names |= set(rust_fn.findall(text))
            continue
        names |= set(re.findall(r"^#\s*define\s+(\w+)\(", text, re.M))
        for m in c_def.finditer(text):
            if balanced_then_brace(text, m.end() - 1):
                names.add(m.group(1))
    return names


def function_problems(arch: str, sources: dict[str, str]) -> list[str]:
    """What is wrong with the functions ARCHITECTURE.md cites; empty when nothing is."""
    rules = rule_names(arch)
    cited = cited_functions(arch) - rules
    defined = defined_functions(sources)
    problems = [f"{n}: cited in ARCHITECTURE.md, no such function under scheduler/src"
                for n in sorted(cited - defined - NOT_FUNCTIONS.keys())]
    everything = "\n".join(sources.values())
    bpf = "\n".join(text for path, text in sources.items() if path.startswith("bpf/"))
    problems += [f"{n}: a rule of ARCHITECTURE.md's table, named nowhere in scheduler/src/bpf"
                 for n in sorted(rules) if not re.search(rf"\b{n}\b", bpf)]
    for n, what in sorted(NOT_FUNCTIONS.items()):
        if n not in cited:
            problems.append(f"{n}: in NOT_FUNCTIONS but no longer cited by ARCHITECTURE.md (drop it)")
        elif not re.search(rf"\b{n}\b", everything):
            problems.append(f"{n} ({what}): cited in ARCHITECTURE.md, not found under scheduler/src")
    return problems


def cli_default(cli_rs: str, field: str) -> int:
    """The default_value_t of the clap argument whose field is @field: a number, or a knob's `dfl::NAME`
    (intf.h's DFL_*, through scheduler/src/bpf_intf.rs)."""
    # from the default to the field, without crossing another field (`pub `)
    m = re.search(rf"default_value_t = ([\w:]+)(?:(?!\bpub\s)[^;])*?\)\]\s*pub {field}:", cli_rs)
    assert m, f"cli.rs: no default_value_t for {field}"
    value = m.group(1)
    if value.startswith("dfl::"):
        const = re.search(rf"pub const {value[5:]}: \w+ = locality_consts_(DFL_\w+) as",
                          read("scheduler/src/bpf_intf.rs"))
        assert const, f"bpf_intf.rs: no {value}"
        m = re.search(rf"\b{const.group(1)}\s*=\s*(\d+)", read("scheduler/src/bpf/intf.h"))
        assert m, f"intf.h: no {const.group(1)}"
        value = m.group(1)
    return int(value.replace("_", ""))


def period_problems(arch: str, cli_rs: str) -> list[str]:
    """The heartbeat and balance-pass periods ARCHITECTURE.md states against cli.rs's defaults."""
    problems = []
    heartbeat_ms = cli_default(cli_rs, "heartbeat_us") / 1000
    m = re.search(r"heartbeat timer, every ([\d.]+) ms", arch)
    if not m or float(m.group(1)) != heartbeat_ms:
        problems.append(f"the heartbeat period: ARCHITECTURE.md says {m.group(0) if m else 'nothing'!r}, "
                        f"cli.rs's default is {heartbeat_ms:g} ms")
    numa_ms = cli_default(cli_rs, "numa_interval_ms")
    m = re.search(r"--numa-interval-ms,\s+(\d+) ms by default", arch)
    if not m or int(m.group(1)) != numa_ms:
        problems.append(f"the balance pass's period: ARCHITECTURE.md says {m.group(0) if m else 'nothing'!r}, "
                        f"cli.rs's default is {numa_ms} ms")
    return problems


def read(rel: str) -> str:
    return (REPO / rel).read_text()


def test_parsers_find_something():
    """Guards the checks below against a parser that silently finds nothing."""
    units = built_units(read("scheduler/build.rs"))
    assert {"main.bpf.c", "place.bpf.c", "decide.bpf.c"} <= units
    assert len(cited_functions(read("ARCHITECTURE.md"))) >= 20
    assert {"place_exec", "wake_follow", "idle_search", "node_overloaded"} <= rule_names(read("ARCHITECTURE.md"))
    defined = defined_functions(source_texts())
    # C across lines, a static C function, a Rust method
    assert {"push_pick_cpu", "dispatch_own", "plan_homes"} <= defined
    # prototypes and calls are not definitions
    assert defined_functions({"x.h": "s32 only_declared(u32 a);\nvoid f(void)\n{\n\tcalled(1);\n}\n"}) == {"f"}


def test_doc_unit_table_is_what_build_rs_builds():
    built = built_units(read("scheduler/build.rs"))
    doc = doc_table_units(read("ARCHITECTURE.md"))
    assert doc == built, (f"ARCHITECTURE.md's unit table lacks {sorted(built - doc)}, "
                          f"has units build.rs does not build: {sorted(doc - built)}")


def test_main_bpf_c_header_lists_the_other_units():
    others = built_units(read("scheduler/build.rs")) - {"main.bpf.c"}
    listed = header_units(read("scheduler/src/bpf/main.bpf.c"))
    assert listed == others, (f"main.bpf.c's header comment lacks {sorted(others - listed)}, "
                              f"lists units build.rs does not build: {sorted(listed - others)}")


def test_doc_cites_only_functions_that_exist():
    problems = function_problems(read("ARCHITECTURE.md"), source_texts())
    assert not problems, "\n".join(problems)


def test_doc_periods_are_the_defaults():
    problems = period_problems(read("ARCHITECTURE.md"), read("scheduler/src/cli.rs"))
    assert not problems, "\n".join(problems)
