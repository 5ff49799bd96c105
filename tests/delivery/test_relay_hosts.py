"""Two hosts on one machine (127.0.0.2 and 127.0.0.3), each with its own HOME, project clone, mail
root, real ``workflow smtpd`` and real Postfix instance (``workflow postfix --write``): a role's
mail to a role of the other host is in Postfix's queue before the 250, reaches the other host's
server through a peer's login, is stored there once and never here — and waits in the queue
while that host is down, then arrives once when it is back; a host that never comes back gives
its sender a bounce as workflow mail."""

from __future__ import annotations

import os
import re
import shutil
import smtplib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.agentd import wait_until
from helpers.project import free_port
from helpers.tiers import spawning
from workflow.core.resources import builtin_dir

pytestmark = pytest.mark.skipif(
    shutil.which("postfix") is None or os.geteuid() != 0,
    reason="needs Postfix (scripts/system-packages installs it) and root, as its master runs only as root",
)
ADDRESS = {"hub": "127.0.0.2", "build": "127.0.0.3"}


class Host:
    def __init__(self, base: Path, name: str, port: int, relay: int) -> None:
        self.name, self.dir, self.home = name, base / name / "project", base / name / "home"
        self.port = port
        self.dir.mkdir(parents=True)
        self.home.mkdir()
        hosts = "".join(
            f'\n[hosts.{n}]\naddress = "{a}"\nrelay_port = {relay}\n' for n, a in ADDRESS.items()
        )  # one file for both hosts: a relay port each, on its own address
        (self.dir / "workflow.toml").write_text(
            f'[workflow]\ndomain = "workflow.local"\nmail_root = "mail"\nbackend = "scripted"\n\n'
            f'[smtp]\nport = {port}\nauth_users_file = "users"\n{hosts}'
        )
        (self.dir / "roles").mkdir()
        text = (builtin_dir("roles") / "implementer.md").read_text()
        (self.dir / "roles" / "implementer.md").write_text(text.replace("+++\n", '+++\nhost = "build"\n', 1))
        (self.dir / "specs" / "proposed").mkdir(parents=True)
        (self.dir / "specs" / "proposed" / "user-auth.md").write_text("# User auth\n")
        self.postfix = base / name / "postfix"
        self.smtpd: subprocess.Popen[str] | None = None
        assert self.run("host", name).returncode == 0

    def env(self) -> dict[str, str]:
        return {**{k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}, "HOME": str(self.home)}

    def run(self, *args: str, tool: str = "workflow") -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "workflow", *args] if tool == "workflow" else [tool, *args]
        return subprocess.run(cmd, cwd=self.dir, env=self.env(), capture_output=True, text=True, timeout=60)

    def box(self, role: str) -> list[Path]:
        d = self.dir / "mail" / role / "new"
        return sorted(d.iterdir()) if d.is_dir() else []

    @spawning
    def start(self) -> None:
        self.smtpd = subprocess.Popen(
            [sys.executable, "-m", "workflow", "smtpd"],
            cwd=self.dir,
            env=self.env(),
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        assert self.smtpd.stderr is not None
        for line in self.smtpd.stderr:
            if "listening on" in line:
                assert ADDRESS[self.name] in line, line
                return
        raise AssertionError(f"{self.name}'s smtpd did not start")

    def stop(self) -> None:
        if self.smtpd is not None and self.smtpd.poll() is None:
            self.smtpd.terminate()
            self.smtpd.wait(timeout=30)
        if self.smtpd is not None and self.smtpd.stderr is not None:
            self.smtpd.stderr.close()
        self.smtpd = None

    def postqueue(self, *args: str) -> str:
        return self.run("-c", str(self.postfix / "etc"), *args, tool="postqueue").stdout


@pytest.fixture
def hosts() -> Iterator[dict[str, Host]]:
    # Postfix's own user must reach each instance's directories: not under pytest's 0700 tree
    tmp_path = Path(tempfile.mkdtemp(prefix="wf-hosts-"))
    tmp_path.chmod(0o755)
    port, relay = free_port(), free_port()
    hs = {n: Host(tmp_path, n, port, relay) for n in ADDRESS}
    for a, b in (("hub", "build"), ("build", "hub")):
        r = hs[a].run("users", "peer", b)  # on a: the login b's Postfix relays b's roles' mail with
        assert r.returncode == 0, r.stderr
        (secret,) = re.findall(r"\): (\S+)$", r.stdout, re.M)
        secrets = hs[b].home / ".config" / "workflow" / "relay-secrets"
        secrets.parent.mkdir(parents=True, exist_ok=True)
        secrets.write_text(f"{a} {secret}\n")
        secrets.chmod(0o600)
    started: list[Host] = []
    try:
        for h in hs.values():
            r = h.run("postfix", "--write", str(h.postfix), "--retry", "1s", "--queue-lifetime", "1h")
            assert r.returncode == 0 and "sudo postfix -c" in r.stdout, r.stderr
            assert (h.postfix / "etc" / "main.cf").stat().st_uid == 0  # root runs it: root owns it
            assert (h.postfix / "etc" / "sasl_passwd").stat().st_mode & 0o077 == 0
            r = h.run("-c", str(h.postfix / "etc"), "start", tool="postfix")
            assert r.returncode == 0, r.stderr
            started.append(h)
            h.start()
        yield hs
    finally:
        for h in hs.values():
            h.stop()
        for h in started:
            h.run("-c", str(h.postfix / "etc"), "stop", tool="postfix")
        shutil.rmtree(tmp_path, ignore_errors=True)


def notify(h: Host, text: str) -> subprocess.CompletedProcess[str]:
    return h.run(
        "notify", "--from", "spec-writer", "question", "specs/*/user-auth.md", "implementer", f"QUESTION={text}"
    )


def test_mail_to_a_role_of_another_host_goes_through_postfix_and_waits_while_that_host_is_down(
    hosts: dict[str, Host],
) -> None:
    hub, build = hosts["hub"], hosts["build"]
    r = notify(hub, "Which store?")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: len(build.box("implementer")) == 1, "the question on build")
    assert hub.box("implementer") == []  # never stored on the host the role does not live on
    # any other local process (a run's agent shares the network) is refused by the relay: no certificate
    relay = int(re.search(r"relay_port = (\d+)", (hub.dir / "workflow.toml").read_text()).group(1))  # type: ignore[union-attr]
    with smtplib.SMTP(ADDRESS["hub"], relay, timeout=10) as s:
        s.starttls()
        with pytest.raises(smtplib.SMTPRecipientsRefused, match="Recipient address rejected: Access denied"):
            s.sendmail("spec-writer@workflow.local", ["implementer@workflow.local"], b"Subject: forged\r\n\r\nx\r\n")
    with smtplib.SMTP(ADDRESS["hub"], relay, timeout=10) as s:
        code, said = s.mail("spec-writer@workflow.local")
        assert code == 530 and b"STARTTLS" in said, said
    copy = build.box("implementer")[0].read_bytes()
    assert b"Which store?" in copy and b"by hub.relay.workflow.local (Postfix)" in copy  # carried by hub's Postfix
    # build is down: the mail waits in hub's queue, nothing is lost; back, it arrives once
    build.stop()
    r = notify(hub, "Still there?")
    assert r.returncode == 0, r.stderr  # in hub's queue: accepted
    wait_until(lambda: ADDRESS["build"] in hub.postqueue("-p"), "the mail to wait in hub's queue for build")
    assert "implementer@workflow.local" in hub.postqueue("-p")
    doctor = hub.run("doctor").stdout
    assert "relay: 1 message(s) wait in the relay's queue for host build" in doctor, doctor
    build.start()
    hub.postqueue("-f")
    wait_until(lambda: len(build.box("implementer")) == 2, "the waiting mail on build")
    wait_until(lambda: "Mail queue is empty" in hub.postqueue("-p"), "hub's queue to empty")
    assert sorted(b"Still there?" in f.read_bytes() for f in build.box("implementer")) == [False, True]
    assert "relay:" not in hub.run("doctor").stdout
    # root runs the instance: doctor flags its files once someone else could change them
    main = hub.postfix / "etc" / "main.cf"
    os.chown(main, 1000, 1000)
    doctor = hub.run("doctor").stdout
    assert f"relay: {main}: owned by uid 1000" in doctor and "controls what root runs" in doctor, doctor
    os.chown(main, 0, 0)
    # without its relay a host answers 451 and keeps nothing: the client tries again
    hub.run("-c", str(hub.postfix / "etc"), "stop", tool="postfix")
    r = notify(hub, "Anyone?")
    assert r.returncode != 0 and "this host's relay (Postfix at 127.0.0.2:" in r.stderr, r.stderr
    assert hub.box("implementer") == [] and len(build.box("implementer")) == 2
    hub.run("-c", str(hub.postfix / "etc"), "start", tool="postfix")
    (hub.dir / "mail" / ".workflow" / "relay").unlink()
    assert "relay: host hub has no relay for its mail to the other hosts" in hub.run("doctor").stdout


def test_a_host_that_never_comes_back_gives_its_sender_a_bounce_it_can_read(hosts: dict[str, Host]) -> None:
    hub, build = hosts["hub"], hosts["build"]
    r = hub.run("postfix", "--write", str(hub.postfix), "--retry", "1s", "--queue-lifetime", "5s")
    assert r.returncode == 0, r.stderr
    assert hub.run("-c", str(hub.postfix / "etc"), "reload", tool="postfix").returncode == 0
    build.stop()
    r = notify(hub, "Hello?")
    assert r.returncode == 0, r.stderr
    mid = r.stdout.strip()
    wait_until(lambda: len(hub.box("spec-writer")) == 1, "the bounce, as workflow mail to spec-writer", timeout=60)
    report = hub.box("spec-writer")[0].read_bytes().decode()
    assert "X-Event-Type: blocker-report" in report and "From: implementer@workflow.local" in report, report
    assert f"your mail {mid} never reached implementer on host build" in report, report
    assert "is host build running?" in report
    assert hub.box("implementer") == [] and build.box("implementer") == []
    # a null sender from anyone but this host's own relay is refused: a bounce is the relay's word only
    with smtplib.SMTP(ADDRESS["hub"], hub.port, timeout=10) as s:
        users = (hub.dir / "users").read_text()
        assert "peer-hub:" in users and ":@hub\n" in users  # the relay's own login, made by --write
        s.ehlo()
        code, said = s.mail("")
        assert code == 530, said
    line = (build.home / ".config/workflow/relay-secrets").read_text().splitlines()
    (secret,) = [x.split()[1] for x in line if x.startswith("hub ")]
    with smtplib.SMTP(ADDRESS["hub"], hub.port, timeout=10) as s:  # build's relay: a peer, not hub's own
        s.login("peer-build", secret)
        code, said = s.mail("")
        assert code == 550 and b"taken from this host's own relay only" in said, said
