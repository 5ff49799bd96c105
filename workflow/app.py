"""App: the objects an entry point builds once (config, roster, maildirs, deliverer) and passes down."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .config import Config, load_config
from .delivery import Deliverer
from .index import Index
from .maildir import Maildirs
from .roster import Roster


@dataclass
class App:
    config: Config

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
        return Deliverer(self.config, self.roster, self.maildirs)

    def index(self) -> Index:
        return Index(self.config.index_path, self.maildirs, self.config.domain)
