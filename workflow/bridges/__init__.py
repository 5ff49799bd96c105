"""Bridges: the outside world's mail and chat, turned into workflow mail and back."""
