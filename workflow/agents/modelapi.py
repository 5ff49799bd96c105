"""Model API: whether the model API a project's agents talk to answers, said while agentd waits for it.

A stand-in or a real API that accepts the connection and never answers left every run waiting in
silence (187 s and more, the CLI's own retries). agentd asks each API its backends use (one HTTP
GET of its base URL: any HTTP answer, even 404, means it answers) before it starts the first run,
says "waiting for the model API at URL: 30 s" every ``[agentd] model_progress`` seconds, and after
``[agentd] model_wait`` seconds with no answer gives up: the roles that use it are paused with the
line, to be resumed with ``agentd resume``. An API that refuses the connection or whose host is
unknown is not waited for: the runs fail at once on it and say so (docs/agentd.md).
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping

from workflow.core.backendkinds import KINDS

# backend → (the variable that moves its API, the API's own address): each Kind's ``api``
APIS = {kind.name: kind.api for kind in KINDS if kind.api[0]}


def api_of(backend: str, env: Mapping[str, str]) -> str:
    """The model API's base URL a run of ``backend`` talks to; "" for a backend that talks to none."""
    if backend not in APIS:
        return ""
    var, default = APIS[backend]
    return env.get(var) or default


def apis(backends: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """The model APIs these backends talk to, each once."""
    return list(dict.fromkeys(u for u in (api_of(b, env) for b in backends) if u))


class Probe:
    """Asks ``url`` in a thread of its own until it answers, it is refused, or ``bound`` seconds pass;
    ``say`` hears the progress every ``every`` seconds. ``waiting`` while no verdict; ``failed`` the
    line when it gave up."""

    def __init__(self, url: str, every: float, bound: float, say: Callable[[str], None]) -> None:
        self.url, self.every, self.bound, self.say = url, every, bound, say
        self.failed = ""
        self.done = threading.Event()
        self.start = time.monotonic()
        self.thread = threading.Thread(target=self._run, name=f"probe {url}", daemon=True)

    def begin(self) -> Probe:
        self.start = time.monotonic()
        self.thread.start()
        return self

    @property
    def waiting(self) -> bool:
        """No verdict yet. A look stuck past the bound (a name lookup takes no timeout) is a verdict too."""
        if not self.done.is_set() and time.monotonic() - self.start > self.bound + self.every:
            self.failed = self.failed or self._gave_up()
            self.done.set()
        return not self.done.is_set()

    def _gave_up(self) -> str:
        return (
            f"the model API at {self.url} did not answer in {self.bound:.0f} s ([agentd] model_wait): "
            "check the network or the base URL (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, "
            "GOOGLE_GEMINI_BASE_URL), then `agentd resume ROLE`"
        )

    def _run(self) -> None:
        start = self.start
        told = 0.0
        try:
            while True:
                waited = time.monotonic() - start
                if waited >= self.bound:
                    self.failed = self._gave_up()
                    return
                if self._answers(min(self.every, self.bound - waited)):
                    return
                waited = time.monotonic() - start
                while told + self.every <= waited:
                    told += self.every
                    self.say(f"waiting for the model API at {self.url}: {told:.0f} s (no run starts until it answers)")
        finally:
            self.done.set()

    def _answers(self, timeout: float) -> bool:
        """True when the API answered or cannot be reached at all (refused, unknown host: runs fail
        on it at once); False when it took the connection and said nothing for ``timeout`` s."""
        end = time.monotonic() + timeout
        try:
            with urllib.request.urlopen(self.url, timeout=max(0.05, timeout)):
                return True
        except urllib.error.HTTPError:
            return True  # an answer: 401, 404… the API is up
        except TimeoutError:
            return False
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                return False
            return True
        except OSError:
            time.sleep(max(0.0, end - time.monotonic()))  # reset mid-request: ask again after the interval
            return False
