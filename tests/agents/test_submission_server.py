"""A run's own submission server: two runs of one process at once (a bridge's, a test's) each get
a server of their own, and neither is refused for the other's."""

from __future__ import annotations

import threading
from pathlib import Path

from helpers.git import git_project
from workflow.agents.runrole import submission_server
from workflow.delivery import local


def test_two_runs_of_one_process_each_start_a_server_of_their_own(tmp_path: Path) -> None:
    p = git_project(tmp_path / "two")
    both = threading.Barrier(2, timeout=30)
    got: dict[int, str] = {}
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            with submission_server(p.app, True) as path:
                got[n] = path
                both.wait()  # both servers up at once, as two overlapping runs' are
                assert local.answers(path)
                both.wait()
        except BaseException as e:
            errors.append(e)
            both.abort()

    threads = [threading.Thread(target=run, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [], errors
    assert len(set(got.values())) == 2 and all(Path(v).parent == p.app.config.state.run_sockets for v in got.values())
    assert not any(local.answers(v) for v in got.values())  # each stopped with its run
