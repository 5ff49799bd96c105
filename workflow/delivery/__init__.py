"""Delivery: the one path into the Maildirs — checks, durable writes, the SMTP server, sending."""
