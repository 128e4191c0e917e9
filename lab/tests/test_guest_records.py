# SPDX-License-Identifier: GPL-2.0-only
"""The guest is not trusted: its records can only put plain, bounded files into the run folder."""
import base64
import os
import random

import fakelab
import pytest

from lab import run


def b64(data: bytes) -> str:
    text = base64.b64encode(data).decode()
    return "\n".join(text[i:i + 76] for i in range(0, len(text), 76))


def hostile_records(outside) -> bytes:
    """A guest report with every kind of bad file record, and two good files among them."""
    recs = [
        "@@booted 1.0", "@@topology ok", "@@step-begin 0", "@@cmd-begin 0 1.0", "@@cmd-end 0 0 2.0",
        f"@@file-begin {outside / 'abs'}", b64(b"absolute"), f"@@file-end {outside / 'abs'}",
        "@@file-begin ../escape", b64(b"dotdot"), "@@file-end ../escape",
        "@@file-begin sub/../../escape2", b64(b"slash"), "@@file-end sub/../../escape2",
        "@@file-begin ..", b64(b"dots"), "@@file-end ..",
        "@@file-begin two words", b64(b"space"), "@@file-end two words",
        "@@file-begin ctl.log", b64(b"the lab's own"), "@@file-end ctl.log",
        "@@file-begin huge", b64(os.urandom(3000)), "@@file-end huge",
        "@@file-begin junk", "\x00\x01not base64 at all\xff", "@@file-end junk",
        "@@file-begin good.txt", b64(b"fine\n"), "@@file-end good.txt",
        "@@file-begin good.txt", b64(b"again\n"), "@@file-end good.txt",
        "\x00\x7f binary junk between records",
        "@@step-begin 99", "@@cmd-end -1 0 1", "@@booted not-a-number", "@@sched-stop rc=x",
        "@@file-begin kernel.log", b64(b"[ 1.0] kernel says hi\n"), "@@file-end kernel.log",
        "@@file-begin cut-short", b64(b"no end"), "@@done",
        "@@file-begin unterminated", b64(b"the end never comes"),
    ]
    return ("\r\n".join(recs) + "\r\n").encode("utf-8", errors="surrogateescape")


def parse(tmp_path, text, steps=1, timed_out=False):
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    r = run.RunResult(machine="numa2", run_dir=str(run_dir), kernel_log=str(run_dir / "kernel.log"),
                      timed_out=timed_out)
    run.parse_ctl(text, run_dir, r, [run.Step(run.parse_sched("eevdf"), "true")] * steps)
    return run_dir, r


def all_files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_hostile_records_write_nothing_outside_the_run_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "GUEST_FILE_MAX_BYTES", 2000)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "ctl.log").write_bytes(hostile_records(outside))
    with open(tmp_path / "ctl.log", "rb") as fh:
        run_dir, r = parse(tmp_path, fh)
    assert all_files(tmp_path) == ["ctl.log", "outside", "run", "run/good.txt", "run/kernel.log"]
    assert (run_dir / "good.txt").read_bytes() == b"fine\n"
    assert set(r.files) == {"good.txt", "kernel.log"}
    errs = "\n".join(r.guest_errors)
    for what in (f"{str(outside / 'abs')!r} is not a plain name", "'../escape' is not a plain name",
                 "'sub/../../escape2' is not a plain name", "'..' is not a plain name",
                 "'two words' is not a plain name", "'ctl.log' is one of the lab's own files",
                 "'huge' is larger than 2000 bytes", "'junk' is not valid base64", "'good.txt' sent twice",
                 "a line that is not a record", "malformed record '@@step-begin 99'",
                 "malformed record '@@cmd-end -1 0 1'", "malformed record '@@booted not-a-number'",
                 "malformed record '@@sched-stop rc=x'", "'cut-short' was not ended by its @@file-end (a record",
                 "'unterminated' was not ended by its @@file-end; dropped"):
        assert what in errs
    assert r.completed and r.steps[0].cmd_exit == 0
    assert r.exit_code() == run.EXIT_INTERNAL


def test_a_symlink_in_the_run_folder_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "kernel.log").symlink_to(victim)
    _, r = parse(tmp_path, f"@@file-begin kernel.log\n{b64(b'overwritten')}\n@@file-end kernel.log\n@@done\n")
    assert victim.read_text() == "precious\n"
    assert "kernel.log" not in r.files and "could not be written" in r.guest_errors[0]


def test_limits_on_number_and_line_length(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "GUEST_FILES_MAX", 3)
    text = "".join(f"@@file-begin f{i}\n{b64(b'x')}\n@@file-end f{i}\n" for i in range(5))
    text += "@@" + "A" * (run.RECORD_MAX_LINE + 10) + "\n@@done\n"
    run_dir, r = parse(tmp_path, text)
    assert sorted(r.files) == ["f0", "f1", "f2"] and not (run_dir / "f3").exists()
    assert "more than 3 files; 'f3' dropped" in r.guest_errors[0]
    assert f"a line longer than {run.RECORD_MAX_LINE} bytes" in r.guest_errors[-1]
    with open(tmp_path / "ctl.log", "wb") as fh:  # the same from a file, where lines are read in bounded pieces
        fh.write(text.encode())
    with open(tmp_path / "ctl.log", "rb") as fh:
        _, r2 = parse(tmp_path, fh)
    assert r2.guest_errors == r.guest_errors


def test_a_guest_killed_mid_file_is_not_blamed(tmp_path):
    _, r = parse(tmp_path, f"@@booted 1\n@@file-begin kernel.log\n{b64(b'half')}\n", timed_out=True)
    assert not r.guest_errors and not r.files and r.exit_code() == run.EXIT_TIMEOUT


def test_records_split_across_reads(tmp_path):
    """The watcher reads ctl.log while QEMU writes it, in pieces that cut records anywhere: it never raises,
    sees every good record once, and the final parse equals a parse of the whole."""
    records = hostile_records(tmp_path / "outside")
    records = records.replace(b"@@cmd-end 0 0 2.0", b"@@cmd-end 0 0 2.0\r\n@@cmd-end zero 0 1")
    ctl = tmp_path / "ctl.log"
    ended = []
    w = run._CtlWatcher(ctl, lambda i, rc: ended.append((i, rc)))
    rnd = random.Random(26)
    pos = 0
    while pos < len(records):
        n = rnd.randint(1, 40)
        with open(ctl, "ab") as fh:
            fh.write(records[pos:pos + n])
        pos += n
        w.poll()
    assert w.booted and ended == [(0, 0)]
    with open(ctl, "rb") as fh:
        _, pieces = parse(tmp_path, fh)
    _, whole = parse(tmp_path, records.decode("utf-8", errors="replace"))
    assert pieces.guest_errors == whole.guest_errors and set(pieces.files) == set(whole.files)


def test_bin_lab_refuses_a_hostile_guest_with_one_line(tmp_path):
    """End to end, with a fake QEMU that plays the hostile guest: exit 8, one clear line, nothing outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    p = fakelab.start(tmp_path, "records", ["run", "--no-build", "--machine", "numa2", "--timeout", "60", "--",
                                            "true"], records=hostile_records(outside), env={"FAKE_FILE_MAX": "2000"})
    try:
        out, err = p.communicate(timeout=120)
    finally:
        fakelab.kill(fakelab.wait_pids(tmp_path, timeout=1) if (tmp_path / "pids").exists() else [])
    assert p.returncode == run.EXIT_INTERNAL, err
    lines = [ln for ln in err.splitlines() if ln.startswith("lab: error:")]
    assert len(lines) == 1 and "the lab refused the guest's report: file name" in lines[0]
    assert "nothing was written outside" in lines[0]
    assert os.listdir(outside) == [] and not (tmp_path / "escape").exists()
    assert not any(p.name in ("escape", "escape2", "abs") for p in tmp_path.rglob("*"))
    run_dir = fakelab.run_dirs(tmp_path)[0]
    assert (run_dir / "good.txt").read_bytes() == b"fine\n"
    assert '"exit": 8' in out.strip().splitlines()[-1]
    # the console reaches the terminal without control characters (no escape sequences), the file keeps it all
    assert "fake guest console ]0;retitled[2J\n" in out and "\x1b" not in out and "\x07" not in out
    assert b"\x1b]0;retitled" in (run_dir / "console.log").read_bytes()


def test_marked_sections():
    text = "boot noise\nmemtest: on\na: 1\nb: 2\nmemtest: off\nc: 3\nother: x\n"
    assert run.marked_sections(text, "memtest") == {"on": "a: 1\nb: 2", "off": "c: 3\nother: x"}
    assert run.marked_sections(text, "explaintest") == {}
