"""Browser: a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by
Selenium — what a person's browser does with our pages: cookies, the CSP, scripts, live updates.

The tests using it skip, saying which part is missing, only when one is absent; `.ci/run`
installs both (scripts/system-packages) and Selenium (the dev extra).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
DRIVER = ("chromedriver", "chromium-driver")


def _which(names: tuple[str, ...]) -> str | None:
    for n in names:
        found = shutil.which(n) or (f"/usr/lib/chromium/{n}" if os.path.exists(f"/usr/lib/chromium/{n}") else None)
        if found:
            return found
    return None


def missing() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    if _which(CHROMIUM) is None:
        return "chromium is not installed (scripts/system-packages installs it)"
    if _which(DRIVER) is None:
        return "chromium-driver is not installed (scripts/system-packages installs it)"
    return None


@contextmanager
def chrome(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A headless Chromium session (skips the test, saying why, when there is none)."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(_which(CHROMIUM))
    for arg in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        opts.add_argument(arg)
    if os.geteuid() == 0:
        opts.add_argument("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(str(_which(DRIVER))))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: Any, cond: Callable[[Any], Any], what: str, timeout: float = 15) -> Any:
    """``cond``'s first true answer; while the page navigates or its live part is replaced under
    a look (a node gone from the document, an element stale), it looks again."""
    from selenium.common.exceptions import TimeoutException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=(WebDriverException,)).until(cond)
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}; the page: {driver.page_source[:3000]}") from None


def log_in(driver: Any, url: str, login: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url + "login")
    driver.find_element(By.ID, "login").send_keys(login)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "submit").click()
    wait_for(driver, lambda d: d.current_url.endswith("/board"), f"{login}'s board after logging in")


def open_link(driver: Any, link: str) -> None:
    """The owner logs in: opens the one-time link `workflow web login` printed."""
    driver.get(link)
    wait_for(driver, lambda d: d.current_url.endswith("/board"), "the owner's board after opening the login link")


def steady(fn: Callable[[], Any], tries: int = 5) -> Any:
    """Run ``fn``, which finds elements and acts on them, again when the page's live update replaced
    an element under it (a person's next try after the page changed under their hand)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    for i in range(tries):
        try:
            return fn()
        except WebDriverException as e:
            gone = isinstance(e, StaleElementReferenceException) or "does not belong to the document" in str(e)
            if not gone or i == tries - 1:
                raise
    return None


def gone(element: Any) -> bool:
    """Whether ``element`` left the document (the page it was on was replaced by the next one)."""
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        return not element.tag_name
    except StaleElementReferenceException:
        return True
