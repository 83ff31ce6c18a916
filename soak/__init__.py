"""Soaks: long runs of real workers against a real PostgreSQL under injected faults."""
