"""Templates: render ``email-templates/<event>.txt`` (jinja2, StrictUndefined, sandboxed).

A template is a header block (``Subject:`` and any extra ``X-…`` headers), an empty line, and
the body. A project's own email-templates/ overrides the built-in ones file by file.
Command-line values are data, never template source: ``{{ 7*7 }}`` in a value stays literal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workflow.core.errors import TemplateError
from workflow.core.resources import builtin_dir
from workflow.mail.message import HEADER_NAME_RE, RESERVED_HEADERS, check_value

KEY_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
STANDARD_VARS = ("FROM_ROLE", "TO_ROLE", "ARTIFACT_PATH", "ARTIFACT_NAME", "WORKFLOW_STATE", "DATE", "MESSAGE_ID")


@dataclass(frozen=True)
class Rendered:
    subject: str
    headers: tuple[tuple[str, str], ...]
    body: str
    source: Path


def template_path(event: str, project_dir: Path) -> Path:
    """The project's override when it has one, else the built-in template."""
    if not re.match(r"^[a-z0-9][a-z0-9-]*$", event):
        raise TemplateError(f"event type {event!r} cannot name a template")
    for d in (project_dir, builtin_dir("email-templates")):
        p = d / f"{event}.txt"
        if p.is_file():
            return p
    raise TemplateError(f"no template for event {event!r}: expected {project_dir / (event + '.txt')} or a built-in one")


def parse_vars(pairs: list[str]) -> dict[str, str]:
    """KEY=VALUE arguments, refusing bad keys, reserved keys, CR/LF and NUL."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise TemplateError(f"argument {pair!r} is not KEY=VALUE")
        if not KEY_RE.match(key):
            raise TemplateError(f"variable name {key!r} must be upper case letters, digits and _ (e.g. CONTEXT)")
        if key in STANDARD_VARS:
            raise TemplateError(f"variable {key} is set by workflow-notify and cannot be given on the command line")
        for ch, what in (("\r", "a carriage return"), ("\n", "a line feed"), ("\0", "a NUL byte")):
            if ch in value:
                raise TemplateError(f"value of {key} contains {what}; values must be one line")
        if key in out:
            raise TemplateError(f"variable {key} given twice")
        out[key] = value
    return out


RANGE_BUDGET = 100_000  # range() items one rendering may make, across every loop
MAX_RENDERED = 1 << 20  # characters one rendering may produce


class Budget:
    """A ``range`` for templates that counts what every call makes against one budget."""

    def __init__(self, left: int) -> None:
        self.left = left

    def range(self, *args: int) -> range:
        r = range(*args)
        self.left -= len(r)
        if self.left < 0:
            raise OverflowError(f"the template's loops go past {RANGE_BUDGET} items")
        return r


def render(event: str, variables: Mapping[str, str], project_templates: Path) -> Rendered:
    """Render one event's template; a missing variable is an error naming it."""
    import jinja2  # lazy: start-up time (~80 ms); only sending renders templates
    from jinja2.sandbox import SandboxedEnvironment

    path = template_path(event, project_templates)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TemplateError(f"{path}: cannot read template: {e}") from None
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.globals["range"] = Budget(RANGE_BUDGET).range  # nested loops cannot pin a server worker
    try:
        text = env.from_string(source).render(**variables)
    except jinja2.UndefinedError as e:
        m = re.search(r"'(\w+)' is undefined", str(e))
        name = m.group(1) if m else str(e)
        raise TemplateError(f"template {path.name} needs {name}: pass {name}=… on the command line") from None
    except jinja2.TemplateError as e:
        raise TemplateError(f"template {path}: {type(e).__name__}: {e}") from None
    except Exception as e:  # OverflowError, MemoryError, RecursionError…: a refusal, never a crash
        raise TemplateError(f"template {path}: {type(e).__name__}: {str(e)[:200]}") from None
    if len(text) > MAX_RENDERED:
        raise TemplateError(f"template {path.name} renders {len(text)} characters; at most {MAX_RENDERED}")
    return split_rendered(text, path)


def split_rendered(text: str, path: Path) -> Rendered:
    head, sep, body = text.replace("\r\n", "\n").partition("\n\n")
    if not sep:
        raise TemplateError(f"template {path.name}: expected a header block, an empty line, then the body")
    subject: str | None = None
    headers: list[tuple[str, str]] = []
    for line in head.split("\n"):
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not HEADER_NAME_RE.match(name):
            raise TemplateError(f"template {path.name}: header line {line!r} is not 'Name: value'")
        check_value(name, value)
        if name.lower() == "subject":
            subject = value
        elif name.lower() in RESERVED_HEADERS:
            raise TemplateError(f"template {path.name}: header {name} is set by workflow-notify, not by templates")
        else:
            headers.append((name, value))
    if subject is None:
        raise TemplateError(f"template {path.name}: no Subject: line in the header block")
    return Rendered(subject, tuple(headers), body.rstrip("\n") + "\n", path)
