"""Which launcher started this process, and what it told us: rank, world size, local rank,
where the rendezvous store lives. A pure function of the environment.

torchrun sets RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT (and GROUP_RANK for the node);
Slurm's srun sets SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NODEID/SLURM_NODELIST; Open MPI's
mpirun sets OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK; MPICH and Intel MPI set PMI_RANK/PMI_SIZE
(and MPI_LOCALRANKID). Under srun and mpirun the store address is MASTER_ADDR/MASTER_PORT when
set, else the first host of SLURM_NODELIST (Slurm) and port 29500.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from doctor.errors import UsageError

DEFAULT_PORT = 29500
MAX_WORLD = 1 << 20  # a bound on what we accept from the environment


@dataclass(frozen=True)
class Launch:
    launcher: str  # "torchrun" | "slurm" | "openmpi" | "pmi"
    rank: int
    world_size: int
    local_rank: int
    node_rank: int | None  # GROUP_RANK / SLURM_NODEID, when the launcher says
    master_addr: str
    master_port: int
    agent_store: bool = False  # torchrun's agent already serves the store at MASTER_ADDR:MASTER_PORT
    restart_count: int = 0
    variables: tuple[tuple[str, str], ...] = ()  # the launcher variables read, for the evidence

    @property
    def gatherer(self) -> bool:
        """One gatherer per node runs the probes; the node's other ranks share its facts."""
        return self.local_rank == 0


# launcher -> (rank, size, local rank, node rank) variable names, in order of precedence
LAUNCHERS = (
    ("torchrun", ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK")),
    ("slurm", ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID")),
    ("openmpi", ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", None)),
    ("pmi", ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", None)),
)


def read_launch(env: Mapping[str, str]) -> Launch | None:
    """The launch this environment describes, None when no launcher started us, or a UsageError
    naming the variable whose value is not usable."""
    for name, (rank_var, size_var, local_var, node_var) in LAUNCHERS:
        if rank_var not in env or size_var not in env:
            continue
        rank = _int(env, rank_var, 0, MAX_WORLD)
        size = _int(env, size_var, 1, MAX_WORLD)
        if rank >= size:
            raise UsageError(f"{rank_var}={rank} is not below {size_var}={size}",
                             "start `doctor fleet` with the launcher itself (torchrun, srun, mpirun), not by hand")
        local = _int(env, local_var, 0, MAX_WORLD) if local_var and local_var in env else 0
        node = _int(env, node_var, 0, MAX_WORLD) if node_var and node_var in env else None
        addr, port = _store_address(env, name)
        used = [v for v in (rank_var, size_var, local_var, node_var, "MASTER_ADDR", "MASTER_PORT", "SLURM_NODELIST")
                if v and v in env]
        return Launch(
            launcher=name, rank=rank, world_size=size, local_rank=local, node_rank=node,
            master_addr=addr, master_port=port,
            agent_store=name == "torchrun" and env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
            restart_count=_int(env, "TORCHELASTIC_RESTART_COUNT", 0, MAX_WORLD) if "TORCHELASTIC_RESTART_COUNT" in env else 0,
            variables=tuple((v, env[v][:200]) for v in used),
        )
    return None


def _store_address(env: Mapping[str, str], launcher: str) -> tuple[str, int]:
    addr = env.get("MASTER_ADDR", "").strip()
    if not addr and launcher == "slurm":
        addr = first_host(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "")
    if not addr:
        raise UsageError(f"no rendezvous address: MASTER_ADDR is not set (started by {launcher})",
                         "export MASTER_ADDR=<the first node's address> MASTER_PORT=29500 before the launcher")
    if not re.fullmatch(r"[A-Za-z0-9._:%\[\]-]{1,253}", addr):
        raise UsageError(f"MASTER_ADDR={addr[:80]!r} is not a host name or an address")
    port = _int(env, "MASTER_PORT", 1, 65535) if env.get("MASTER_PORT") else DEFAULT_PORT
    return addr.strip("[]"), port


def _int(env: Mapping[str, str], name: str, low: int, high: int) -> int:
    text = env.get(name, "").strip()
    if not re.fullmatch(r"\d{1,8}", text) or not low <= int(text) <= high:
        raise UsageError(f"{name}={text[:40]!r} is not a whole number from {low} to {high}",
                         "start `doctor fleet` with the launcher itself (torchrun, srun, mpirun)")
    return int(text)


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: "gpu[07-09,12],cpu1" -> "gpu07" (zero padding kept)."""
    nodelist = nodelist.strip()[:4096]
    m = re.match(r"([^,\[]+)(?:\[([^\]]*)\])?", nodelist)
    if not m:
        return ""
    prefix, ranges = m.group(1), m.group(2)
    if ranges is None:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


def expand_nodelist(nodelist: str, limit: int = 4096) -> list[str]:
    """Every host of a Slurm node list ("n[1-3],m05" -> n1 n2 n3 m05), at most `limit` of them."""
    hosts: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?(?:,|$)", nodelist.strip()[:65536]):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            hosts.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                continue
            for n in range(int(lo), int(hi or lo) + 1):
                hosts.append(f"{prefix}{n:0{len(lo)}d}")
                if len(hosts) >= limit:
                    return hosts
    return hosts
