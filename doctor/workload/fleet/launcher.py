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

from doctor.errors import UsageError
from doctor.record import record

DEFAULT_PORT = 29500
MAX_WORLD = 1 << 20  # a bound on what we accept from the environment


@record(frozen=True)
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
        name = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
        try:
            addr = first_host(env.get(name) or "")
        except ValueError as exc:
            raise UsageError(f"{name}={env[name][:80]!r} is not a Slurm host list: {exc}",
                             'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"') from None
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
    """The first host of a Slurm node list: "gpu[07-09,12],cpu1" -> "gpu07" (zero padding kept),
    "rack[1-2]-n[01-04]" -> "rack1-n01". Raises ValueError when it is not a host list."""
    hosts = expand_nodelist(nodelist, limit=1)
    return hosts[0] if hosts else ""


MAX_BRACKETS = 8
# One host expression: text and bracketed ranges, in turn ("rack", "1-2", "-n", "01-04", "").
_HOST = re.compile(r"[^\[\],\s]*(?:\[[^\[\]]*\][^\[\],\s]*)*")


def expand_nodelist(nodelist: str, limit: int = 4096) -> list[str]:
    """The hosts of a Slurm node list, as `scontrol show hostnames` lists them ("n[1-2]-ib[3-4],m05"
    -> n1-ib3 n1-ib4 n2-ib3 n2-ib4 m05; commas and blanks separate; each bracket a list of numbers
    and ranges, zero padding kept), at most `limit`. Raises ValueError for what Slurm would not
    have written: an unclosed bracket, a range that is not numbers or runs backwards."""
    text, hosts, at = nodelist.strip()[:65536], [], 0
    while at < len(text) and len(hosts) < limit:
        if text[at] in ", \t\n":
            at += 1
            continue
        m = _HOST.match(text, at)
        if not m.group() or (m.end() < len(text) and text[m.end()] not in ", \t\n"):
            raise ValueError(f"an unmatched bracket at character {m.end() + 1}")
        pieces = re.split(r"\[([^\]]*)\]", m.group())
        if len(pieces) > 2 * MAX_BRACKETS + 1:  # Slurm's widest names have a few: bounds the recursion below
            raise ValueError(f"more than {MAX_BRACKETS} bracketed lists in one name")
        ranges = [_numbers(r) for r in pieces[1::2]]
        hosts.extend(_combine(pieces[0::2], ranges, limit - len(hosts)))
        at = m.end()
    return hosts


def _numbers(spec: str) -> list[tuple[range, int]]:
    out = []
    for part in spec.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or len(lo) > 9 or len(hi) > 9:
            raise ValueError(f"[{spec[:40]}] is not a list of numbers and ranges")
        if int(hi or lo) < int(lo):
            raise ValueError(f"the range {part} runs backwards")
        out.append((range(int(lo), int(hi or lo) + 1), len(lo)))
    return out


def _combine(texts: list[str], ranges: list[list[tuple[range, int]]], limit: int) -> list[str]:
    """Every name texts[0] n1 texts[1] n2 …, the first bracket varying slowest (as Slurm
    orders them), at most `limit`, without building the product of large ranges."""
    if not ranges:
        return [texts[0]][:limit]
    out: list[str] = []
    for numbers, width in ranges[0]:
        for n in numbers:
            for rest in _combine(texts[1:], ranges[1:], limit - len(out)):
                out.append(f"{texts[0]}{n:0{width}d}{rest}")
            if len(out) >= limit:
                return out
    return out
