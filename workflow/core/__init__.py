"""Core: the foundation every layer stands on — errors, config, the state directory, resources."""
