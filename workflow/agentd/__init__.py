"""agentd: the daemon that wakes roles when their trigger mail arrives, and its task queue."""
