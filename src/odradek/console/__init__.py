"""The web console: pages of a cluster's brokers, topics, consumer groups and records (issue 14)."""
