"""Postfix: each host's own relay instance, which carries its roles' mail to the other hosts.

``workflow postfix --write DIR`` writes an instance of this project's own — ``DIR/etc/main.cf``,
``master.cf``, the ``transport`` and ``sasl_passwd`` maps, its queue and data directories and its
log file — and leaves the system's instance and ``/etc/postfix`` untouched. Postfix's master runs
as root only, and root must own what it runs: the owner writes, then the printed ``sudo`` lines
hand ``DIR/etc`` to root and start the instance (run as root, ``--write`` does the handing itself).

* It listens on loopback only (this host's address when that is a loopback one, else 127.0.0.1),
  on ``[hosts.NAME] relay_port``, for this host's ``workflow smtpd``, which hands it the copies
  for other hosts' roles before it answers ``250``.
* ``transport`` sends each role's and panel member's address to its host's ``workflow smtpd``
  (``[smtp] port`` on that host's address); ``sasl_passwd`` logs in there as ``peer-THIS`` with
  the secret that host's ``workflow users peer THIS`` printed, which this host's owner keeps in
  ``~/.config/workflow/relay-secrets`` (``HOST SECRET`` lines, mode 0600). Its bounces go back
  to this host's own smtpd, under a login of its own that ``--write`` makes (the line for THIS).
* TLS is required toward a host whose address is not loopback.
* While a host is down its mail waits in the queue and is retried; after ``--queue-lifetime``
  Postfix gives up and bounces.
"""

from __future__ import annotations

import os
import pwd
import shlex
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from workflow.core.config import Config
from workflow.core.errors import WorkflowError
from workflow.core.hosts import chosen
from workflow.ops.users import append_private
from workflow.policy.roster import Roster

SECRETS = "~/.config/workflow/relay-secrets"
SERVICES = (  # master.cf: every service this instance needs, none chrooted (a private queue directory)
    ("pickup", "unix n - n 60 1 pickup"),
    ("cleanup", "unix n - n - 0 cleanup"),
    ("qmgr", "unix n - n 300 1 qmgr"),
    ("tlsmgr", "unix - - n 1000? 1 tlsmgr"),
    ("rewrite", "unix - - n - - trivial-rewrite"),
    ("bounce", "unix - - n - 0 bounce"),
    ("defer", "unix - - n - 0 bounce"),
    ("trace", "unix - - n - 0 bounce"),
    ("verify", "unix - - n - 1 verify"),
    ("flush", "unix n - n 1000? 0 flush"),
    ("proxymap", "unix - - n - - proxymap"),
    ("proxywrite", "unix - - n - 1 proxymap"),
    ("smtp", "unix - - n - - smtp"),
    ("relay", "unix - - n - - smtp"),
    ("showq", "unix n - n - - showq"),
    ("error", "unix - - n - - error"),
    ("retry", "unix - - n - - error"),
    ("discard", "unix - - n - - discard"),
    ("anvil", "unix - - n - 1 anvil"),
    ("scache", "unix - - n - 1 scache"),
    ("postlog", "unix-dgram n - n - 1 postlogd"),
)


class Setup(NamedTuple):
    """What ``--write`` puts where, and the lines that start and stop it."""

    files: Mapping[str, str]  # path under DIR → text
    start: str
    stop: str
    queue: str  # the line that shows what waits, for which host


def read_secrets(path: Path) -> dict[str, str]:
    """``HOST SECRET`` lines: the logins other hosts gave this one (``workflow users peer``)."""
    try:
        st = path.stat()
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise WorkflowError(f"{path}: cannot read: {e}") from None
    if st.st_mode & 0o077:
        raise WorkflowError(
            f"{path}: holds secrets and is readable by others (mode {stat.S_IMODE(st.st_mode):o}); chmod 600 it"
        )
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise WorkflowError(f"{path}:{n}: expected HOST SECRET")
        out[parts[0]] = parts[1]
    return out


def plan(
    config: Config,
    roster: Roster,
    directory: Path,
    secrets: Mapping[str, str],
    lifetime: str = "5d",
    retry: str = "300s",
    client: str = "CLIENT-CERTIFICATE-FINGERPRINT",
) -> Setup:
    """The instance of this host, in ``directory`` (absolute); ``client``: the SHA-256 fingerprint
    of this host's smtpd's certificate (``certificates``), the only client it relays for."""
    this = chosen(config.file, config.hosts, config.this_host)
    if not this:
        raise WorkflowError(f"{config.file} lists no [hosts.NAME]: one host needs no relay (docs/hosts.md)")
    here = config.host(this)
    assert here is not None
    missing = [h.name for h in config.hosts if h.name != this and h.name not in secrets]
    if missing:
        raise WorkflowError(
            f"no login for this host's mail on {', '.join(missing)}: on each, run `workflow users peer {this}`, "
            f"then add its line `HOST SECRET` to {SECRETS} here (mode 0600)"
        )
    own = secrets.get(this, "SECRET-MADE-BY---write")  # the login this host's smtpd takes its bounces with
    d, etc = directory, directory / "etc"
    port = config.smtp.port
    transport, passwd, tls = [], [], []
    names = sorted({*(r for r in roster.roles if roster.roles[r].takes_mail), *roster.members})
    for name in names:
        host = config.host(roster.host_of(name))
        assert host is not None
        transport.append(f"{roster.address(name)} smtp:[{host.address}]:{port}")
    passwd.append(f"[{here.address}]:{port} peer-{this}:{own}")
    for host in config.hosts:
        if host.name != this:
            passwd.append(f"[{host.address}]:{port} peer-{this}:{secrets[host.name]}")
            if not host.loopback:
                tls.append(f"[{host.address}]:{port} encrypt")
    main = f"""# workflow postfix --write: host {this}'s relay instance for {config.file}; regenerate, do not edit
compatibility_level = 3.6
queue_directory = {d / "queue"}
data_directory = {d / "data"}
mail_owner = postfix
myhostname = {this}.relay.{config.domain}
mydestination =
local_transport = error:this instance delivers to no local mailbox
alias_maps =
alias_database =
local_recipient_maps =
relay_domains = {config.domain}
inet_interfaces = {here.address if not here.loopback else "127.0.0.1"}
inet_protocols = ipv4
mynetworks =
smtpd_tls_cert_file = {etc / "relay.pem"}
smtpd_tls_key_file = {etc / "relay.key"}
smtpd_tls_security_level = encrypt
smtpd_tls_ask_ccert = yes
smtpd_tls_fingerprint_digest = sha256
relay_clientcerts = texthash:{etc / "clientcerts"}
smtpd_relay_restrictions = permit_tls_clientcerts, reject
smtpd_recipient_restrictions = permit_tls_clientcerts, reject
transport_maps = texthash:{etc / "transport"}
default_transport = error:not an address of a role of {config.domain}
smtp_bind_address = {here.address}
smtp_dns_support_level = disabled
smtp_sasl_auth_enable = yes
smtp_sasl_password_maps = texthash:{etc / "sasl_passwd"}
smtp_sasl_security_options = noanonymous
smtp_tls_security_level = may
smtp_tls_policy_maps = texthash:{etc / "tls_policy"}
maillog_file = {d / "maillog"}
maillog_file_prefixes = {d}
biff = no
maximal_queue_lifetime = {lifetime}
bounce_queue_lifetime = {lifetime}
minimal_backoff_time = {retry}
maximal_backoff_time = {retry}
queue_run_delay = {retry}
"""
    master = f"{here.relay_address}:{here.relay_port} inet n - n - - smtpd\n" + "".join(
        f"{name:<10} {line}\n" for name, line in SERVICES
    )
    c = shlex.quote(str(etc))
    return Setup(
        files={
            "etc/main.cf": main,
            "etc/master.cf": master,
            "etc/transport": "\n".join(transport) + "\n",
            "etc/sasl_passwd": "\n".join(passwd) + "\n",
            "etc/tls_policy": "\n".join(tls) + "\n",
            "etc/clientcerts": f"{client} {this}-smtpd\n",
        },
        start=f"sudo chown -R root:root {c} && sudo chown postfix {shlex.quote(str(d / 'data'))} && sudo postfix -c {c} start",
        stop=f"sudo postfix -c {c} stop",
        queue=f"sudo postqueue -c {c} -p",
    )


def write(setup: Setup, directory: Path) -> None:
    """Write the files (``sasl_passwd`` 0600) and directories; as root, hand them to root and
    the data directory to Postfix's user, as the start line does."""
    for sub in ("etc", "queue", "data"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
        (directory / sub).chmod(0o755)  # Postfix's own user works in the queue and the data directories
    directory.chmod(0o755)
    for name, text in setup.files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o600 if name.endswith("sasl_passwd") else 0o644)
    if os.geteuid() == 0:
        for root, dirs, files in os.walk(directory / "etc"):
            for name in [*dirs, *files, "."]:
                os.chown(os.path.join(root, name), 0, 0)
        os.chown(directory / "queue", 0, 0)  # the top only: Postfix owns what it made inside
        os.chown(directory / "data", pwd.getpwnam("postfix").pw_uid, -1)


def writable_by_others(directory: Path) -> list[str]:
    """The instance's files root runs that someone other than root could change: ``workflow
    doctor``'s finding (whoever can write main.cf controls what root runs)."""
    found = []
    for name in ("etc", "etc/main.cf", "etc/master.cf", "etc/transport", "etc/sasl_passwd", "etc/tls_policy"):
        path = directory / name
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if st.st_uid != 0 or st.st_mode & 0o022 or stat.S_ISLNK(st.st_mode):
            found.append(f"{path}: owned by uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}")
    return found


def problems(config: Config) -> list[str]:
    """``workflow doctor``'s lines about this host's relay: none written yet, files root runs that
    others could change, and what waits in its queue for which host."""
    if len(config.hosts) < 2 or not config.this_host:
        return []
    try:
        directory = Path(config.state.relay.read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        return [f"host {config.this_host} has no relay for its mail to the other hosts: `workflow postfix --write DIR`"]
    out = [
        f"{line}: whoever can write it controls what root runs; sudo chown -R root:root {directory / 'etc'}"
        for line in writable_by_others(directory)
    ]
    try:
        shown = subprocess.run(
            ["postqueue", "-c", str(directory / "etc"), "-p"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return out
    waiting: dict[str, int] = {}
    entries = shown.split("\n\n")  # postqueue -p: one paragraph per queued message, its last error in it
    for host in config.hosts:
        n = sum(f"[{host.address}]" in entry for entry in entries)
        if n:
            waiting[host.name] = n
    out.extend(
        f"{n} message(s) wait in the relay's queue for host {h} (down?): sudo postqueue -c {directory / 'etc'} -p"
        for h, n in waiting.items()
    )
    return out


def keep_secret(path: Path, host: str, secret: str) -> None:
    """Add ``HOST SECRET`` to the relay secrets file (0600 in a 0700 directory)."""
    append_private(path, f"{host} {secret}\n")


def certificates(config: Config, directory: Path) -> str:
    """Make what is missing of the instance's certificate (``DIR/etc/relay.pem``) and of the
    client certificate this host's smtpd hands it mail with (in the state directory, which no
    agent sees): any other local process, a run's agent among them, is refused a relay. The
    client certificate's SHA-256 fingerprint, as Postfix's ``relay_clientcerts`` reads it."""
    etc = directory / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    cert, key = config.state.relay_client
    for pem, secret, name in ((etc / "relay.pem", etc / "relay.key", "relay"), (cert, key, "smtpd")):
        if not pem.exists() or not secret.exists():
            secret.parent.mkdir(parents=True, exist_ok=True)
            _openssl(
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "3650",
                "-subj",
                f"/CN={config.this_host}-{name}",
                "-keyout",
                str(secret),
                "-out",
                str(pem),
            )
            secret.chmod(0o600)
    said = _openssl("x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256")
    return said.strip().partition("=")[2]


def _openssl(*args: str) -> str:
    try:
        r = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise WorkflowError(f"openssl: {e.strerror} (apt-get install openssl)") from None
    if r.returncode != 0:
        raise WorkflowError(f"openssl {args[0]}: {r.stderr.strip()[-300:]}")
    return r.stdout
