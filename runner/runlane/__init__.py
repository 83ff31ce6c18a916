"""runlane: durable, Postgres-native dispatch for AI-agent runs."""

__version__ = "0.2.0"

from .stream import stream  # noqa: E402 - after the version, which submodules may read

__all__ = ["__version__", "stream"]
