"""Web: ``workflow web``, the browser cockpit — the board, inboxes and threads, runs and budgets,
live, and a person's decisions with one click.

It sits in the layers like the CLI (docs/ARCHITECTURE.md): a thin server over the library the CLI
uses — ``artifacts.board`` (and its visibility rule), ``mail.inbox``, ``agentd.status``,
``artifacts.decisions`` — with nothing of its own to decide what a person may see or do. Only
the CLI imports it, to start it.

* ``auth`` — logins (the ``[smtp] auth_users_file`` logins and the owner's links), sessions, CSRF tokens;
* ``once`` — the owner's one-time login links, and the Unix socket ``workflow web login`` asks;
* ``pages`` — what each page shows a viewer, read from the library;
* ``actions`` — what a button does: mail under the person's identity, through the delivery path;
* ``live`` — notices when mail, artifacts or runs change, so open pages update;
* ``server`` — the ASGI app (starlette on uvicorn): routes, headers, the event stream.
"""
