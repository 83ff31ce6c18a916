"""runlane: durable, Postgres-native dispatch for AI-agent runs."""

__version__ = "0.1.0"
