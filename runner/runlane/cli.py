"""The `runlane` command line."""

from __future__ import annotations

import sys

import click
import psycopg

from . import errors
from .migrate import MigrationError, migrate

dsn_option = click.option(
    "--dsn", envvar="RUNLANE_DSN", required=True,
    help="PostgreSQL connection string (or $RUNLANE_DSN).")


@click.group()
def main() -> None:
    """runlane: durable, Postgres-native dispatch for AI-agent runs."""


def fail(exc: BaseException) -> None:
    if isinstance(exc, psycopg.Error):
        click.echo(errors.describe(exc), err=True)
        sys.exit(errors.exit_code(exc))
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


@main.command("migrate")
@dsn_option
@click.option("--to", "to", type=int, default=None,
              help="Stop after this migration (e.g. --to 2 for a staged upgrade).")
def migrate_cmd(dsn: str, to: int | None) -> None:
    """Apply pending migrations, then re-apply the functions."""
    try:
        with psycopg.connect(dsn) as conn:
            applied = migrate(conn, to=to)
    except (psycopg.Error, MigrationError) as exc:
        fail(exc)
    if applied:
        for m in applied:
            click.echo(f"applied {m.version:04d}_{m.name}")
    else:
        click.echo("schema is up to date")
