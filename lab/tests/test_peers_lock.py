# SPDX-License-Identifier: GPL-2.0-only
"""bin/lab peers under a shared cache: one build of a peer at a time."""
import os
import threading

import pytest

from lab import peers

def test_concurrent_peer_builds_install_once(monkeypatch, tmp_path):
    """Two bin/lab processes asking for one peer at once: one cargo install, the other waits and reuses it."""
    monkeypatch.setenv("LOCALITY_CACHE", str(tmp_path / "cache"))
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "cargo"
    fake.parent.mkdir()
    # installs the binary where cargo install --root ROOT would, after a pause that lets the other build queue
    fake.write_text('#!/bin/sh\necho "$@" >> ' + str(calls) + '\nsleep 1\nwhile [ "$1" != --root ]; do shift; done\n'
                    'mkdir -p "$2/bin"\nprintf "#!/bin/sh\\n" > "$2/bin/scx_rusty"\nchmod +x "$2/bin/scx_rusty"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(peers, "clang_for_bpf", lambda: None)
    if peers.binary("scx_rusty").parent != peers.root() / "bin":
        pytest.skip("peer binaries are not under the install root")
    results = []
    ts = [threading.Thread(target=lambda: results.append(peers.build("scx_rusty", log=lambda s: None)))
          for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert [ok for ok, _ in results] == [True, True]
    assert len(calls.read_text().splitlines()) == 1
