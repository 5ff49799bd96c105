"""CLI base: what every command family shares — error mapping, the App, options, standalone scripts.

A ``WorkflowError`` anywhere below a command becomes one ``Error: …`` line and its exit code
(the error class's). Commands reach the App through ``app(ctx)``, built from the root options
(``--config``, ``--mail-root``). ``standalone`` turns a subcommand (or group) into its own
script with those same options — ``workflow-notify``, ``run-role`` and ``agentd`` are made so.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import click

from workflow.app import App
from workflow.bridges.sections import SECTIONS
from workflow.cli.fast import JSON, VIA, Param, Spec
from workflow.core import diskfull, ownership
from workflow.core.config import BACKENDS, Config
from workflow.core.errors import UsageError, WorkflowError
from workflow.core.locate import Artifact
from workflow.policy.guardrails import Stay

CONTEXT = {"help_option_names": ["-h", "--help"]}


class Fail(click.ClickException):
    """A WorkflowError on its way out: its text, and its class's exit code."""

    def __init__(self, e: WorkflowError) -> None:
        super().__init__(str(e))
        self.exit_code = e.exit_code  # type: ignore[misc]  # click declares it on the class


COMPLETES = {
    "role": "roles",
    "as_role": "roles",
    "sender": "roles",
    "state": "states",
    "event": "events",
    "artifact": "artifacts",
}


def completer(kind: str) -> Any:
    """A click shell-completion function offering this project's ``kind`` (roles, states, events,
    artifacts); nothing when there is no project here."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
        try:
            a = App.load(plugins=SECTIONS)
            if kind == "roles":
                names = a.roster.identities()
            elif kind == "states":
                names = list(a.config.states)
            elif kind == "events":
                names = list(a.config.event_types)
            else:
                from workflow.core.locate import scan  # lazy: only completion scans artifacts here

                found = scan(a.config)
                names = sorted({*(x.path for x in found), *(x.stem for x in found)})
        except WorkflowError:
            return []
        return [n for n in names if n.startswith(incomplete)]

    return complete


class _Errors:
    """Mixin: a WorkflowError anywhere below becomes one 'Error: …' line and its exit code; and
    the global options (``--config``, ``--mail-root``) are accepted after any subcommand too."""

    params: list[click.Parameter]

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        # not where the command has options of those names (the scripts' own, init's --mail-root)
        self.own_root_params = not any(p.name in ("config_path", "mail_root") for p in self.params)
        if self.own_root_params:
            self.params.extend(root_params())
        for p in self.params:  # shell completion: role names, states, events, artifacts (of this project)
            kind = COMPLETES.get(p.name or "")
            if kind is not None and getattr(p, "_custom_shell_complete", None) is None:
                p._custom_shell_complete = completer(kind)

    def invoke(self, ctx: click.Context) -> Any:
        if self.own_root_params:
            config, mail_root = ctx.params.pop("config_path", None), ctx.params.pop("mail_root", None)
            if config is not None or mail_root is not None:
                root = ctx.find_root()
                was = root.obj if isinstance(root.obj, Options) else Options()
                root.obj = Options(config or was.config, mail_root or was.mail_root)
                root.meta.pop("app", None)
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except WorkflowError as e:
            raise Fail(e) from None


class Group(_Errors, click.Group):
    pass


class Command(_Errors, click.Command):
    pass


class Options(NamedTuple):
    """The root options every command's App is built from."""

    config: Path | None = None
    mail_root: Path | None = None


def _stay(config: Config, artifact: Artifact, state: str) -> Stay | None:
    """An artifact's past stay in a state, as its moves' commits tell it (``policy.guardrails.History``)."""
    from workflow.artifacts.movers import stay  # lazy: only a claim that disagrees reads git

    return stay(config, artifact, state)


def app(ctx: click.Context) -> App:
    """The App for this invocation, built once from the root options."""
    root = ctx.find_root()
    if not isinstance(root.meta.get("app"), App):
        opts = root.obj if isinstance(root.obj, Options) else Options()
        run = None
        if os.environ.get("WORKFLOW_RUN"):  # an agent inside a run threads its replies from what run-role told it
            from workflow.cli.runs import inside_run  # lazy: only a command inside a run needs the run's code

            run = inside_run(None)
        root.meta["loaded_at"] = time.time_ns()
        loaded = App.load(
            opts.config, opts.mail_root, parent=run.parent if run else None, plugins=SECTIONS, history=_stay
        )
        if run is None:  # inside a run the mail root is out of the agent's sight: run-role checked it
            ownership.check(loaded.config)
            root.meta["checked"] = opts.mail_root is None  # a snapshot knows no --mail-root
        root.meta["app"] = loaded
    found: App = root.meta["app"]
    return found


def keep_snapshot(ctx: click.Context) -> None:
    """After a short command ran in full (cli.fast could not), save the project's snapshot so
    the next one can run fast — if this one checked the mail root and none is current."""
    root = ctx.find_root()
    a = app(ctx)
    if not root.meta.get("checked") or a.config.path is None:
        return
    from workflow.core import snapshot  # lazy: only the short commands keep a snapshot

    if snapshot.load(str(a.config.path), os.environ) is None:
        a.save_snapshot(int(root.meta["loaded_at"]))


def params(spec: Spec) -> list[click.Parameter]:
    """A short command's parameters (declared once in cli.fast) as click parameters."""
    return [param(p) for p in spec.params]


def param(p: Param) -> click.Parameter:
    if p.kind in ("arg", "rest"):
        return click.Argument([p.dest], metavar=p.metavar, nargs=-1 if p.kind == "rest" else 1)
    return click.Option([p.decl, p.dest], **_option(p))


F = TypeVar("F", bound=Callable[..., Any])


def option(p: Param) -> Callable[[F], F]:
    """A declared option (cli.fast) as a click decorator, for commands that are not short ones."""
    decorate: Callable[[F], F] = click.option(p.decl, p.dest, **_option(p))
    return decorate


def _option(p: Param) -> dict[str, Any]:
    return {
        "is_flag": p.kind == "flag",
        "type": int if p.integer else click.Choice(p.choices) if p.choices else None,
        "default": p.default,
        "required": p.required,
        "metavar": p.metavar,
        "show_default": p.show_default,
        "help": p.help,
    }


def root_params() -> list[click.Parameter]:
    """``--config`` and ``--mail-root``: the root group's options, and every standalone script's."""
    return [
        click.Option(
            ["--config", "config_path"],
            type=click.Path(path_type=Path),
            default=None,
            help="workflow.toml to use (default: the nearest one above the current directory, or $WORKFLOW_CONFIG).",
        ),
        click.Option(
            ["--mail-root"],
            type=click.Path(path_type=Path),
            default=None,
            help="Mail root (default: $WORKFLOW_MAIL_ROOT, then [workflow] mail_root); it must be this project's.",
        ),
    ]


def one_of(value: str | None, known: Sequence[str], what: str) -> str | None:
    """``value`` when it is one of ``known`` (or None); else a one-line refusal with a suggestion."""
    if value is None or value in known:
        return value
    import difflib  # lazy: start-up time; only a typo needs it

    close = difflib.get_close_matches(value, list(known), n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise UsageError(f"unknown {what} {value!r}; {hint}expected one of {', '.join(known)}")


backend_option = click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default=None,
    help="Agent backend for every run (default: each role's or member's own).",
)
via_option = option(VIA)
json_option = option(JSON)


def version_param(prog: str) -> click.Option:
    """``--version``: the program's name and workflow-mail's version."""

    def show(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if not value or ctx.resilient_parsing:
            return
        from importlib.metadata import version  # lazy: only --version needs it

        click.echo(f"{prog}, version {version('workflow-mail')}")
        ctx.exit()

    return click.Option(
        ["--version"], is_flag=True, expose_value=False, is_eager=True, callback=show, help="Show the version and exit."
    )


def standalone(cmd: click.Command, name: str) -> click.Command:
    """``cmd`` as a script of its own: the same parameters and subcommands, plus the root
    group's ``--config`` and ``--mail-root``, so ``workflow-notify …`` is ``workflow notify …``."""

    def callback(**kw: Any) -> Any:
        ctx = click.get_current_context()
        ctx.obj = Options(kw.pop("config_path"), kw.pop("mail_root"))
        return ctx.invoke(cmd.callback, **kw) if cmd.callback is not None else None

    own = [p for p in cmd.params if p.name not in ("config_path", "mail_root")]  # the script has them itself
    params = [*root_params(), version_param(name), *own]
    if isinstance(cmd, click.Group):
        return Group(
            name, commands=cmd.commands, callback=callback, params=params, help=cmd.help, context_settings=CONTEXT
        )
    return Command(name, callback=callback, params=params, help=cmd.help, context_settings=CONTEXT)


EX_TEMPFAIL = 75  # sysexits.h: try again later (a full disk)
WAITS = {  # what waits when the disk is full, by command: said on the one line instead of a traceback
    "run-role": "the run is left open and its mail unread; the role's next run recovers it once there is room",
    "agentd": "runs wait; start agentd again once there is room (nothing queued is lost)",
    "smtpd": "no mail is taken until there is room (clients are told 452 and retry)",
}


def waits(argv: Sequence[str]) -> str:
    """What waits for room, for the command ``argv`` names."""
    for word in [os.path.basename(sys.argv[0]), *argv]:
        if word in WAITS:
            return WAITS[word]
    return "nothing half written was kept; run it again once there is room"


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # SIGTERM unwinds like Ctrl-C: locks released, a run rolled back


def run_script(cmd: click.Command, prog: str) -> None:
    """Run a click entry point as users expect of a Unix command — exit 130 on Ctrl-C, 143 on
    SIGTERM (after the command's own cleanup), the error class's code on a WorkflowError — then
    leave without interpreter teardown (~20 ms of a short command's life): output is flushed and
    every file and database was closed by its owner."""
    signal.signal(signal.SIGTERM, _terminate)
    code: object
    try:
        rv = cmd.main(prog_name=prog, standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except click.exceptions.Abort as e:
        interrupted = isinstance(e.__cause__, KeyboardInterrupt) or isinstance(e.__context__, KeyboardInterrupt)
        print("interrupted" if interrupted else "Aborted!", file=sys.stderr)
        code = 130 if interrupted else 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except click.ClickException as e:
        e.show()
        code = e.exit_code
    except SystemExit as e:
        code = e.code
    except Exception as e:
        if not diskfull.is_full(e):
            raise
        print(f"{prog}: {diskfull.line(e, os.getcwd(), waits(sys.argv[1:]))}", file=sys.stderr)
        code = EX_TEMPFAIL
    import logging  # lazy: start-up time; logging is configured only by the daemons

    logging.shutdown()
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)
