"""Listen: where ``workflow web`` listens and how it starts — the listener policy, both loopback families, the link socket.

Loopback by default; any other address only with ``--allow-remote`` and HTTPS. On loopback the
cockpit holds both families of its port (127.0.0.1 and ::1) or refuses to start, naming who
holds it, and answers ``workflow web login`` on ``<state>/sock/web`` with a fresh one-time link.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from workflow.app import App
from workflow.core.errors import WorkflowError
from workflow.delivery import local
from workflow.delivery.server import listeners
from workflow.web.server import Web


def check_bind(host: str, allow_remote: bool, app: App) -> bool:
    """The listener policy of ``delivery.server.listeners`` for the web: loopback by default; any other
    address only with --allow-remote and HTTPS ([web] tls_cert and tls_key). Returns whether it
    serves HTTPS."""
    cfg, where = app.config.web, app.config.path or "workflow.toml"
    tls = bool(cfg.tls_cert and cfg.tls_key)
    if tls:
        try:
            listeners.tls_context(cfg.tls_cert, cfg.tls_key)
        except WorkflowError as e:
            raise WorkflowError(str(e).replace("[smtp]", "[web]")) from None
    if listeners.is_loopback(host):
        return tls
    if not allow_remote:
        raise WorkflowError(
            f"refusing to listen on {host}: not a loopback address (use --allow-remote, with [web] tls_cert and tls_key)"
        )
    if not tls:
        raise WorkflowError(
            f"refusing to listen on {host}: --allow-remote needs HTTPS; set [web] tls_cert and tls_key in {where}"
        )
    return tls


def keep_out_of_gc() -> None:
    """What the server made whole lives as long as it does: out of the collector's sight
    (``gc.freeze``), a full collection — every few renders — walks what changed since, not the
    100,000 rows a board is made from (~0.3 s). Only the server's own process calls it."""
    gc.collect()
    gc.freeze()


def serve(app: App, host: str, port: int, https: bool, started: Callable[[str, str | None], None], link: bool) -> None:
    """Serve until SIGINT or SIGTERM; ``started`` gets the URL once it listens, and the owner's
    first one-time login link (None without ``link``). On loopback it holds both families of the
    port or refuses to start (``listeners.reserve_loopback``), and listens at ``<state>/sock/web``
    for ``workflow web login``."""
    import uvicorn  # lazy: only `workflow web` loads the server

    loopback = listeners.is_loopback(host)
    if loopback:
        held = listeners.reserve_loopback(host, port)
        name = listeners.loopback_addresses(host)[0]
    else:
        held = [listeners.reserve(host, port)]
        name = "127.0.0.1" if host.strip("[]") in ("0.0.0.0", "::", "") else host  # a wildcard: this host's own
    path = str(app.config.state.web_socket)
    try:
        asking = local.claim(path, "workflow web")
    except WorkflowError:
        for sock in held:
            sock.close()
        raise
    made = local.identity(path)
    bound = held[0].getsockname()[1]
    scheme = "https" if https else "http"
    at = "" if (scheme, bound) in (("http", 80), ("https", 443)) else f":{bound}"  # as a browser's Host says it
    origin = f"{scheme}://{f'[{name}]' if ':' in name else name}{at}"
    web = Web(app, https=https, kept=keep_out_of_gc, local=loopback, origin=origin, links=asking)
    cfg = app.config.web
    config = uvicorn.Config(
        web.asgi(),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
        ssl_certfile=cfg.tls_cert or None,
        ssl_keyfile=cfg.tls_key or None,
        server_header=False,
    )
    try:
        started(origin + "/", web.link() if link else None)
        uvicorn.Server(config).run(sockets=held)
    finally:
        local.remove(path, made)
