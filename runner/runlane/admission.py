"""Memory admission: may this process take on another run right now?

Two independent checks, each against the same small startup buffer:
  * available physical memory: MemAvailable from /proc/meminfo, or, when the process's
    cgroup (v2) has a limit, the smaller of that and memory.max - memory.current;
  * the process's own headroom: RLIMIT_AS minus its address space (VmSize) and
    RLIMIT_DATA minus its data segment (VmData), when those limits are set.
A probe returns `Memory(available, headroom)` in bytes (headroom None = unlimited); tests
and operators can inject their own probe with `--memory-probe module:attr`.
"""

from __future__ import annotations

import importlib
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import log


@dataclass(frozen=True)
class Memory:
    available: int | None  # bytes of physical memory available to us (None = unknown)
    headroom: int | None  # bytes before our own rlimits bite (None = unlimited)


def _kv_file(path: str) -> dict[str, int]:
    found = {}
    try:
        for line in Path(path).read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                found[key] = int(parts[0]) * (1024 if parts[-1] == "kB" else 1)
    except OSError:
        pass
    return found


def _cgroup_free() -> int | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            base = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            try:
                limit = (base / "memory.max").read_text().strip()
                if limit == "max":
                    return None
                return int(limit) - int((base / "memory.current").read_text().strip())
            except (OSError, ValueError):
                return None
    return None


def system_probe() -> Memory:
    available = _kv_file("/proc/meminfo").get("MemAvailable")
    cgroup = _cgroup_free()
    if cgroup is not None:
        available = cgroup if available is None else min(available, cgroup)
    status = _kv_file("/proc/self/status")
    headroom = None
    for limit_name, used_key in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        soft, _hard = resource.getrlimit(getattr(resource, limit_name))
        if soft != resource.RLIM_INFINITY and used_key in status:
            free = soft - status[used_key]
            headroom = free if headroom is None else min(headroom, free)
    return Memory(available, headroom)


def load_probe(spec: str | None) -> Callable[[], Memory]:
    if not spec:
        return system_probe
    module_name, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module_name), attr or "probe")


class Admission:
    """Admits or declines claims; logs one wait and one resume per capacity episode."""

    def __init__(self, probe: Callable[[], Memory], buffer_bytes: int):
        self.probe = probe
        self.buffer = buffer_bytes
        self.waiting_since: float | None = None

    def admit(self, lane: str) -> bool:
        try:
            memory = self.probe()
            ok = all(v is None or v >= self.buffer for v in (memory.available, memory.headroom))
        except Exception as exc:  # noqa: BLE001 - a broken probe must not stop dispatch
            log.get().warning("admission.probe_failed", **log.error_fields(exc))
            ok = True
        if not ok and self.waiting_since is None:
            self.waiting_since = time.monotonic()
            log.get().warning(
                "run.admission_wait",
                **{
                    "run.lane": lane,
                    "admission.buffer_bytes": self.buffer,
                    "admission.available_bytes": memory.available,
                    "admission.headroom_bytes": memory.headroom,
                },
            )
        elif ok and self.waiting_since is not None:
            waited = int((time.monotonic() - self.waiting_since) * 1000)
            self.waiting_since = None
            log.get().info(
                "run.admission_resumed", **{"run.lane": lane, "admission.wait_ms": waited}
            )
        return ok

    @property
    def waiting(self) -> bool:
        return self.waiting_since is not None
