"""workflow-mail: Maildir-native workflow mail for teams of AI agent roles and humans."""

__version__ = "0.1.0"
