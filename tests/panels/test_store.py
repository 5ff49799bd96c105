"""The panel store: opening a session seals its artifact for delivery; leaving `sealed` lifts the seal."""

from __future__ import annotations

import sqlite3

from helpers.project import Project
from workflow.mail.seals import sealed_artifacts
from workflow.panels.store import PanelStore, SessionState


def test_a_session_seals_on_open_and_unseals_when_it_leaves_sealed(project: Project) -> None:
    config = project.app.config
    panel = config.panel("spec-reviewer-panel")
    assert panel is not None
    assert sealed_artifacts(config.state, panel.name) == []  # no store yet: nothing sealed, nothing created
    assert not config.state.panels.exists()
    with PanelStore(config.state.panels) as store:
        s = store.open("<r1@x>", panel, "specs/proposed/user-auth.md", "spec-writer")
        assert s.state == SessionState.SEALED
        store.open("<r1@x>", panel, "specs/proposed/user-auth.md", "spec-writer")  # idempotent
        assert sealed_artifacts(config.state, panel.name) == ["specs/proposed/user-auth.md"]
        assert sealed_artifacts(config.state, "spec-writer-panel") == []
        store.update("<r1@x>", state=SessionState.UNSEALING)
        assert sealed_artifacts(config.state, panel.name) == []
        assert store.get("<r1@x>").state == SessionState.UNSEALING


def test_a_session_sealed_before_the_seal_table_existed_is_sealed_again(project: Project) -> None:
    config = project.app.config
    panel = config.panel("spec-reviewer-panel")
    assert panel is not None
    with PanelStore(config.state.panels) as store:
        store.open("<old@x>", panel, "specs/proposed/user-auth.md", "spec-writer")
    db = sqlite3.connect(config.state.panels)
    db.execute("DROP TABLE seal")  # as a store written before seals were kept
    db.commit()
    db.close()
    with PanelStore(config.state.panels):
        pass
    assert sealed_artifacts(config.state, panel.name) == ["specs/proposed/user-auth.md"]
