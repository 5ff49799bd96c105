"""The running server takes edited roles and config for the next notification (delivery.server.current)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.project import Project
from helpers.smtp import server_process
from workflow.core.resources import builtin_dir
from workflow.delivery import submit, xnotify
from workflow.delivery.credentials import client_credential
from workflow.delivery.server.current import Inotify, Stamps

ART = "specs/proposed/user-auth.md"


def test_a_role_or_config_edited_while_the_server_runs_is_used_by_the_next_notification(project: Project) -> None:
    owner = client_credential(mail_root=project.mail)
    sock = str(project.app.config.state.socket)

    def notify(to: str) -> tuple[str, list[str]]:
        """XNOTIFY, as workflow-notify's fast path sends it: the server composes the message."""
        req = xnotify.Request("question", ART, to, "spec-writer", "", ("QUESTION=Why?",))
        return submit.submit(sock, 10, owner.login, owner.secret, req)

    with server_process(project.dir):
        with pytest.raises(submit.RefusedError, match="550 .*ops-reviewer"):
            notify("ops-reviewer")
        # A role added to the project's roles folder (the folder is new too)
        (project.dir / "roles").mkdir()
        role = (builtin_dir("roles") / "spec-reviewer.md").read_text().replace("spec-reviewer", "ops-reviewer")
        (project.dir / "roles" / "ops-reviewer.md").write_text(role)
        mid, rcpts = notify("ops-reviewer")
        assert rcpts == ["ops-reviewer@workflow.local"]
        assert [mid.strip("<>").encode() in p.read_bytes() for p in project.new_files("ops-reviewer")] == [True]
        # the full command's MAIL and RCPT meet the same roster
        r = project.run(
            "notify", "--via", "smtp", "--from", "spec-writer", "question", ART, "ops-reviewer", "QUESTION=Q"
        )
        assert r.returncode == 0 and "(smtp:" in r.stderr, r.stderr
        assert len(project.new_files("ops-reviewer")) == 2

        # workflow.toml half written: XNOTIFY is refused, so workflow-notify runs in full and says why
        toml = project.dir / "workflow.toml"
        good = toml.read_text()
        toml.write_text(good + "[panels.\n")
        with pytest.raises(submit.RefusedError, match="451 4.3.0 the changed config cannot be loaded"):
            notify("spec-reviewer")
        r = project.run("status-update", ART, "spec-writer", tool="workflow-notify")
        assert r.returncode != 0 and "workflow.toml" in r.stderr, (r.returncode, r.stderr)
        # … and then a panel member added
        member = '[panels.spec-reviewer-panel]\nmembers = ["claude", "gpt-5", "gemini", "mistral"]\n'
        toml.write_text(good.replace('[panels.spec-reviewer-panel]\nmembers = ["claude", "gpt-5", "gemini"]\n', member))
        assert notify("spec-reviewer-panel.mistral")[1] == ["spec-reviewer-panel.mistral@workflow.local"]
        # a role file broken: the last good roster serves, and XNOTIFY is refused; removed, it is gone
        (project.dir / "roles" / "ops-reviewer.md").write_text("+++\nmode = 7\n")
        with pytest.raises(submit.RefusedError, match="451 4.3.0 .*ops-reviewer.md"):
            notify("ops-reviewer")
        (project.dir / "roles" / "ops-reviewer.md").unlink()
        with pytest.raises(submit.RefusedError, match="550 .*ops-reviewer"):
            notify("ops-reviewer")


def test_a_change_is_seen_once_by_inotify_and_by_stat_stamps_where_inotify_is_missing(tmp_path: Path) -> None:
    roles, toml = tmp_path / "roles", tmp_path / "workflow.toml"
    toml.write_text("[workflow]\n")
    for make in (Stamps, Inotify.make):
        watch = make([toml, roles])
        assert watch is not None and not watch.changed()
        toml.write_text(toml.read_text() + "# edited\n")
        assert watch.changed() and not watch.changed()
    inotify = watch
    assert isinstance(inotify, Inotify)
    roles.mkdir()  # a folder made, then a file in it before the folder is watched
    (roles / "a.md").write_text("+++\n")
    assert inotify.changed()
    inotify.follow([toml, roles])
    assert inotify.changed() and not inotify.changed()  # looked at again: it was unseen
    (roles / "a.md").write_text("+++\nmode = 'async'\n")
    assert inotify.changed() and not inotify.changed()
    inotify.close()
