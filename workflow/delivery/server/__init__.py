"""The SMTP server and its ingest engine: aiosmtpd's protocol, group commit, AIO fsyncs, workers.

The delivery path (``delivery.deliverer`` and the modules beside it) is what every message takes;
this package is one way in to it — the long-running server that accepts SMTP, checks logins and
commits deliveries in groups. Nothing in the delivery path imports from here.
"""
