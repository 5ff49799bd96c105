"""Gmail bridge: IMAP in, labels, agents (the todo forwarder), the reply loop, SMTP out."""
