"""Run runlane's benchmarks: `python -m bench [--quick]` runs every one in turn and prints
a summary; `python -m bench NAME [options]` runs one (`python -m bench NAME --help`).

Each benchmark starts its own throwaway PostgreSQL cluster, prints its figures and writes
them as JSON to bench/results/ (git-ignored). Benchmarks are never run as tests.
"""

from __future__ import annotations

import importlib
import inspect
import io
import sys
import time
import traceback
from pathlib import Path

# These first, in this order; then every other bench/*.py module (not `_private`), by name.
FIRST = ["claim_throughput", "claim_history", "procrastinate_compare", "tick_bench"]


def available() -> list[str]:
    found = {p.stem for p in Path(__file__).parent.glob("*.py") if not p.stem.startswith("_")}
    return [n for n in FIRST if n in found] + sorted(found - set(FIRST))


class _Tee(io.TextIOBase):
    """Writes through to the real stdout and keeps a copy for the summary."""

    def __init__(self, out):
        self.out, self.kept = out, []

    def write(self, text: str) -> int:
        self.kept.append(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def run_one(name: str, args: list[str]) -> list[str]:
    """Run benchmark `name` with its own command-line `args`; returns its summary lines."""
    module = importlib.import_module(f"bench.{name}")
    entry = module.main
    tee = _Tee(sys.stdout)
    saved_out, saved_argv = sys.stdout, sys.argv
    sys.stdout = tee
    try:
        if inspect.signature(entry).parameters:
            result = entry(args)
        else:  # a main() that reads sys.argv itself
            sys.argv = [f"python -m bench {name}", *args]
            result = entry()
    finally:
        sys.stdout, sys.argv = saved_out, saved_argv
    if isinstance(result, list) and result:
        return [str(line) for line in result]
    lines = [ln for ln in "".join(tee.kept).splitlines() if ln.strip()]
    return lines[-4:]


def run_all(quick: bool) -> int:
    summaries: dict[str, list[str]] = {}
    failed = []
    for name in available():
        print(f"== {name}", flush=True)
        entry = importlib.import_module(f"bench.{name}").main
        args = ["--quick"] if quick and inspect.signature(entry).parameters else []
        started = time.monotonic()
        try:
            lines = run_one(name, args)
        except Exception:  # one broken benchmark must not hide the others' figures
            traceback.print_exc()
            failed.append(name)
            lines = ["FAILED (traceback above)"]
        summaries[name] = [*lines, f"[{name}: {time.monotonic() - started:.0f} s]"]
        print(flush=True)
    print("=" * 72)
    print("Benchmark summary")
    print("=" * 72)
    for name, lines in summaries.items():
        print(f"-- {name}")
        for line in lines:
            print(line if line.startswith(" ") else f"  {line}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        print("benchmarks:", ", ".join(available()))
        return 0
    if argv and not argv[0].startswith("-"):
        name, rest = argv[0], argv[1:]
        if name not in available():
            print(f"unknown benchmark {name!r}; known: {', '.join(available())}", file=sys.stderr)
            return 2
        run_one(name, rest)
        return 0
    unknown = [a for a in argv if a != "--quick"]
    if unknown:
        print(
            f"unknown options {unknown}: `python -m bench [--quick]` or "
            "`python -m bench NAME [options]`",
            file=sys.stderr,
        )
        return 2
    return run_all("--quick" in argv)


if __name__ == "__main__":
    sys.exit(main())
