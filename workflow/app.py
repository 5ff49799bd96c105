"""App: the objects an entry point builds once (config, roster, maildirs, deliverer) and passes down."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from workflow.core.config import Config, load_config
from workflow.mail.index import Index
from workflow.mail.maildir import Maildirs
from workflow.policy.roster import Roster

if TYPE_CHECKING:
    from workflow.delivery.deliverer import Deliverer


class App:
    """Config plus what is built from it on first use."""

    def __init__(self, config: Config) -> None:
        self.config = config

    @classmethod
    def load(cls, config_path: Path | None = None, mail_root: Path | None = None, cwd: Path | None = None) -> App:
        return cls(load_config(config_path, mail_root=mail_root, cwd=cwd))

    @cached_property
    def roster(self) -> Roster:
        return Roster.load(self.config)

    @cached_property
    def maildirs(self) -> Maildirs:
        return Maildirs(self.config.mail_root)

    @cached_property
    def deliverer(self) -> Deliverer:
        from workflow.delivery.deliverer import Deliverer

        return Deliverer(self.config, self.roster, self.maildirs)

    def index(self) -> Index:
        return Index(self.config.index_path, self.maildirs, self.config.domain)
