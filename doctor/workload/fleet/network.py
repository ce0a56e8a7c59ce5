"""This node's network readiness for torch.distributed, read through Host: where MASTER_ADDR
resolves (and whether to a loopback address), whether GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME name
interfaces that exist and are up (/sys/class/net), /dev/shm's size (/proc/mounts), the locked-memory
limit (/proc/self/limits) and the NCCL_* settings. Facts only; doctor/diagnose/fleet.py judges.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from typing import Any

from doctor.host import Host

SHOWN_ENV = ("MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME")
UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def node_network(host: Host, master_addr: str, master_port: int) -> dict[str, Any]:
    """The network facts of this node (no verdicts)."""
    interfaces = {name: (host.read_text(f"/sys/class/net/{name}/operstate", 64) or "").strip() or "unknown"
                  for name in host.listdir("/sys/class/net")[:256]}
    addresses, error = resolve(host, master_addr)
    return {
        "master_addr": master_addr,
        "master_port": master_port,
        "master_addresses": addresses,
        "master_resolve_error": error,
        "master_loopback": bool(addresses) and all(is_loopback(a) for a in addresses),
        "interfaces": interfaces,
        "socket_ifname": {var: ifname_state(host.env[var], interfaces)
                          for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") if host.env.get(var)},
        "shm": shm_facts(host.read_text("/proc/mounts") or "", host.read_text("/proc/meminfo") or "",
                         host.disk_free("/dev/shm") if host.is_dir("/dev/shm") else None),
        "memlock": memlock(host.read_text("/proc/self/limits") or ""),
        "env": {k: v[:200] for k, v in sorted(host.env.items())
                if (k.startswith("NCCL_") or k in SHOWN_ENV)}

    }


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def resolve(host: Host, name: str) -> tuple[list[str], str]:
    """Addresses for `name` (`getent ahosts`, which asks NSS as the C library does), or an error."""
    try:
        return [str(ipaddress.ip_address(name.split("%")[0]))], ""
    except ValueError:
        pass
    result = host.run(["getent", "ahosts", name], timeout=5)
    if result.returncode == 2:
        return [], f"{name} does not resolve (getent ahosts: not found)"
    if not result.ok:
        return [], result.error or f"getent ahosts {name} exited {result.returncode}"
    return parse_getent(result.stdout), ""


def parse_getent(text: str) -> list[str]:
    """`getent ahosts` lines ("127.0.0.1       STREAM localhost") → unique addresses in order."""
    out: list[str] = []
    for line in text.splitlines()[:256]:
        parts = line.split()
        if parts and parts[0] not in out:
            try:
                ipaddress.ip_address(parts[0].split("%")[0])
            except ValueError:
                continue
            out.append(parts[0])
    return out


def ifname_state(value: str, interfaces: dict[str, str]) -> dict[str, Any]:
    """What a *_SOCKET_IFNAME value selects here. NCCL's syntax: `eth` a prefix, `=eth0` exact,
    `^docker` excludes (then nothing to check); gloo takes exact names, comma-separated."""
    value = value.strip()[:256]
    if value.startswith("^"):
        return {"value": value, "matched": [], "missing": [], "down": [], "exclusion": True}
    exact = value.startswith("=")
    matched, missing, down = [], [], []
    for want in filter(None, (w.strip() for w in value.lstrip("=").split(","))):
        hits = [n for n in interfaces if (n == want if exact else n.startswith(want))]
        if not hits:
            missing.append(want)
        matched += hits
        down += [n for n in hits if interfaces[n] not in ("up", "unknown")]
    return {"value": value, "matched": matched, "missing": missing, "down": down, "exclusion": False}


def shm_facts(mounts: str, meminfo: str, free: int | None) -> dict[str, Any]:
    """/dev/shm's size: the tmpfs `size=` option, else the kernel default (half of RAM)."""
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "/dev/shm":
            m = re.search(r"(?:^|,)size=(\d+)([kmgt]?)(?:,|$)", parts[3], re.I)
            if m:
                size, source = int(m.group(1)) * UNITS[m.group(2).lower()], "mount option size="
            else:
                total = re.search(r"^MemTotal:\s+(\d+) kB", meminfo, re.M)
                size, source = (int(total.group(1)) * 1024 // 2 if total else None), "tmpfs default: half of RAM"
            return {"mounted": True, "size_bytes": size, "free_bytes": free, "source": source, "mount": line[:300]}
    return {"mounted": False, "size_bytes": None, "free_bytes": free, "source": "not in /proc/mounts", "mount": ""}


def memlock(limits: str) -> dict[str, Any]:
    """`ulimit -l` soft and hard, in bytes (None = unlimited), from /proc/self/limits."""
    m = re.search(r"^Max locked memory\s+(\S+)\s+(\S+)", limits, re.M)
    if not m:
        return {"known": False, "soft_bytes": None, "hard_bytes": None}

    def value(text: str) -> int | None:
        return None if text == "unlimited" else int(text) if text.isdigit() else None

    return {"known": True, "soft_bytes": value(m.group(1)), "hard_bytes": value(m.group(2))}


def reach(addr: str, port: int, timeout: float) -> dict[str, Any]:
    """Whether a TCP connection to addr:port opens within `timeout` (the rendezvous store's port).
    A socket, not a Host command: the question is this process's own route to the store."""
    start = time.monotonic()
    try:
        with socket.create_connection((addr, port), timeout=timeout):
            return {"reachable": True, "error": "", "seconds": round(time.monotonic() - start, 3)}
    except OSError as exc:
        return {"reachable": False, "error": f"{type(exc).__name__}: {exc}"[:300],
                "seconds": round(time.monotonic() - start, 3)}
