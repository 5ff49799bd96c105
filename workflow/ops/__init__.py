"""Ops: running a project — init, doctor, the demo, the IMAP and mail-client set-ups."""
