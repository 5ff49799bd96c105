"""The aiosmtpd adapter: every private member it relies on exists in the installed aiosmtpd."""

from __future__ import annotations

import tomllib
from importlib.metadata import version

from helpers.project import ROOT
from workflow.delivery.server.protocol import (
    PRIVATE_ATTRIBUTES,
    PRIVATE_INIT_ATTRIBUTES,
    PRIVATE_METHODS,
    missing_private_api,
)


def test_the_installed_aiosmtpd_has_every_private_member_we_use() -> None:
    missing = missing_private_api()
    assert missing == [], (
        f"aiosmtpd {version('aiosmtpd')} no longer has {', '.join(missing)}: workflow/delivery/server/protocol.py "
        "must be ported before the upper bound on aiosmtpd in pyproject.toml is raised"
    )


def test_the_check_notices_what_a_class_lacks() -> None:
    class Stripped:
        def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
            return None, None

        def _cb_client_connected(self, reader: object, writer: object) -> None:
            self._reader = reader  # and no _writer

    missing = missing_private_api(Stripped)
    assert set(missing) == {
        "_set_post_data_state",
        "_call_handler_hook",
        "_writer",
        "_reset_timeout",
        "_timeout_cb",
        "_timeout_handle",
        "_timeout_duration",
    }
    assert set(PRIVATE_METHODS) | set(PRIVATE_ATTRIBUTES) | set(PRIVATE_INIT_ATTRIBUTES) >= set(missing)


def test_aiosmtpd_is_pinned_below_the_next_minor_release() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(d for d in deps if d.startswith("aiosmtpd"))
    assert "<1.5" in pin, pin
