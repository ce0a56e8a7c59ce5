"""`doctor fleet` verdicts: the gathered node reports, network facts, collective and training
results → areas and findings. Pure: no Host, no torch; tests feed it recorded dicts.
"""

from __future__ import annotations

import re
from typing import Any

from doctor import __version__
from doctor.diagnose.diff import Input, Spread, compare_many
from doctor.formats import human_bytes
from doctor.model import Area, Evidence, Finding, Level, Report

SHM_MIN = 512 << 20  # NCCL's shared-memory transport wants far more than Docker's 64 MiB default
MEMLOCK_MIN = 64 << 20  # IB/RDMA registration: "unlimited" is what HPC sites set
TABLE_COLUMNS = ("node", "ranks", "torch", "libtorch", "ABI", "variant", "driver", "CUDA", "NCCL", "GPUs")


def node_names(payloads: list[dict]) -> dict[int, str]:
    """Gatherer rank → a node name: the host name, with the node number when hosts repeat."""
    gatherers = [p for p in payloads if p.get("report") is not None]
    hosts = [p["host"] for p in gatherers]
    out = {}
    for p in gatherers:
        node = p["node_rank"] if p.get("node_rank") is not None else p["rank"]
        out[p["rank"]] = p["host"] if hosts.count(p["host"]) == 1 else f"{p['host']}:node{node}"
    return out


def ranks_of(payloads: list[dict], names: dict[int, str]) -> dict[str, list[int]]:
    """Node name → its ranks (a rank belongs to the gatherer on its host with the same node number)."""
    out: dict[str, list[int]] = {n: [] for n in names.values()}
    for p in payloads:
        home = next((r for r in names if payloads[r]["host"] == p["host"]
                     and payloads[r].get("node_rank") == p.get("node_rank")), None)
        if home is not None:
            out[names[home]].append(p["rank"])
    return out


def node_row(name: str, ranks: list[int], report: dict) -> dict[str, str]:
    facts = report.get("facts") or {}
    lt = facts.get("libtorch") or {}
    active = (lt.get("candidates") or [None])[lt["active"]] if isinstance(lt.get("active"), int) else None
    torch = facts.get("python_torch") or {}
    nvidia = (facts.get("gpu") or {}).get("nvidia") or {}
    gpus = [g.get("name") or "?" for g in nvidia.get("gpus") or [] if isinstance(g, dict)]
    return {
        "node": name, "ranks": ",".join(map(str, ranks)),
        "torch": torch.get("version") or "-",
        "libtorch": (active or {}).get("version") or "-",
        "ABI": (active or {}).get("abi") or "-",
        "variant": (active or {}).get("variant") or "-",
        "driver": nvidia.get("driver_version") or "-",
        "CUDA": torch.get("cuda") or "-",
        "NCCL": str(torch.get("nccl") or "-"),
        "GPUs": f"{len(gpus)}× {gpus[0]}" if gpus else "0",
    }


def table(rows: list[dict[str, str]], columns: tuple[str, ...]) -> list[str]:
    widths = [max(len(c), *(len(r.get(c, "")) for r in rows)) for c in columns]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [line(columns)] + [line([r.get(c, "") for c in columns]) for r in rows]


def differences_area(names: dict[int, str], payloads: list[dict]) -> tuple[Area, list[dict]]:
    inputs = [Input(names[r], payloads[r]["report"]) for r in names]
    spreads = compare_many(inputs) if len(inputs) > 1 else []
    findings = [_spread_finding(s, inputs) for s in spreads]
    major = sum(f.level is not Level.INFO for f in findings)
    summary = ("same on every node" if not findings else
               f"{major} fact{'s' * (major != 1)} differ across nodes" + (f" ({len(findings) - major} minor, -v)" if len(findings) > major else ""))
    if len(inputs) == 1:
        summary = "one node: nothing to compare"
    data = [{"area": s.fact.area, "fact": s.fact.label, "level": s.fact.level.value,
             "values": [{"value": v, "nodes": list(n)} for v, n in s.values]} for s in spreads]
    return Area("differences", "Differences between nodes", summary, findings=findings), data


def _spread_finding(s: Spread, inputs: list[Input]) -> Finding:
    from doctor.diagnose.diff import fill_fix

    held = "; ".join(f"{v} on {', '.join(nodes)}" for v, nodes in s.values)
    majority, nodes = s.values[0]
    others = [n for _, ns in s.values[1:] for n in ns]
    source = next(i for i in inputs if i.name == nodes[0])
    # diff's fixes speak of A (the machine that works) and B: here A is the majority, B the others
    fix = re.sub(r"\bA(?='s\b|\b)", nodes[0], fill_fix(s.fact, source.data))
    fix = re.sub(r"\bB\b", ", ".join(others), fix)
    return Finding("fleet.differs", s.fact.level, f"{s.fact.label} differs across nodes: {held}",
                   detail="\n".join(f"{', '.join(ns)}: {v}" for v, ns in s.values), fix=fix, area="differences",
                   evidence=[Evidence("derived", n, f"{s.fact.path} = {v}") for v, ns in s.values for n in ns],
                   subject=s.fact.label)


def node_problems_area(names: dict[int, str], payloads: list[dict]) -> Area:
    """Each node's own `doctor check` warnings and errors, named by node (exit codes as check)."""
    findings, worst_nodes = [], []
    for rank, name in names.items():
        for f in payloads[rank]["report"].get("findings") or []:
            if f.get("level") in ("warning", "error"):
                findings.append(Finding(str(f.get("id")), Level(f["level"]), f"{name}: {f.get('title')}",
                                        str(f.get("detail") or ""), str(f.get("fix") or ""), "nodes",
                                        [Evidence("derived", name, "doctor check on this node")], f"{name}:{f.get('subject')}"))
                worst_nodes.append(name)
    rows = [node_row(name, [], payloads[r]["report"]) for r, name in names.items()]
    summary = f"{len(names)} node{'s' * (len(names) != 1)}, {len(payloads)} rank{'s' * (len(payloads) != 1)}"
    if worst_nodes:
        summary += f"; `doctor check` problems on {', '.join(dict.fromkeys(worst_nodes))}"
    return Area("nodes", "Nodes", summary, table(rows, TABLE_COLUMNS), findings)


def network_area(names: dict[int, str], payloads: list[dict], world_size: int) -> Area:
    findings: list[Finding] = []
    details = []
    multi_host = len({payloads[r]["host"] for r in names}) > 1
    for rank, name in names.items():
        net = payloads[rank].get("network") or {}
        addr = f"{net.get('master_addr')}:{net.get('master_port')}"
        details.append(f"{name}: MASTER_ADDR {net.get('master_addr')} → {', '.join(net.get('master_addresses') or []) or 'unresolved'}; "
                       f"/dev/shm {_size(_get(net, 'shm', 'size_bytes'))}; ulimit -l {_size(_get(net, 'memlock', 'soft_bytes'), 'unlimited')}; "
                       f"NCCL_*: {', '.join(f'{k}={v}' for k, v in (net.get('env') or {}).items() if k.startswith('NCCL_')) or 'none'}")
        ev = [Evidence("derived", name, f"MASTER_ADDR={net.get('master_addr')}")]
        if net.get("master_resolve_error"):
            findings.append(Finding("dist.master-addr", Level.ERROR, f"{name}: MASTER_ADDR does not resolve: {net['master_resolve_error']}",
                                    fix="set MASTER_ADDR to the first node's address as every node resolves it (an IP avoids DNS)",
                                    area="network", evidence=ev, subject=name))
        elif net.get("master_loopback") and multi_host:
            findings.append(Finding("dist.master-addr", Level.ERROR,
                                    f"{name}: MASTER_ADDR {net.get('master_addr')} is a loopback address while the job spans hosts",
                                    detail=f"it resolves to {', '.join(net.get('master_addresses') or [])}: other hosts would dial themselves",
                                    fix="set MASTER_ADDR to rank 0's host name or routable IP (check /etc/hosts maps the host name to it)",
                                    area="network", evidence=ev, subject=name))
        reach = net.get("port") or {}
        if reach and not reach.get("reachable", True):
            findings.append(Finding("dist.port-unreachable", Level.ERROR, f"{name}: cannot connect to the rendezvous at {addr}",
                                    detail=str(reach.get("error") or ""),
                                    fix=f"open TCP port {net.get('master_port')} on rank 0's host to every node (firewall, security group)",
                                    area="network", evidence=ev, subject=name))
        for var, state in (net.get("socket_ifname") or {}).items():
            bad = [f"{i} does not exist" for i in state.get("missing") or []] + [f"{i} is down" for i in state.get("down") or []]
            if bad:
                up = [i for i, s in (net.get("interfaces") or {}).items() if s in ("up", "unknown")]
                findings.append(Finding("dist.socket-ifname", Level.ERROR, f"{name}: {var}={state.get('value')}: {'; '.join(bad)}",
                                        fix=f"set {var} to an interface this node has and that is up: {', '.join(up) or 'none is up'}",
                                        area="network", evidence=[Evidence("file", "/sys/class/net", f"{var}={state.get('value')}")],
                                        subject=f"{name}:{var}"))
        shm = _get(net, "shm", "size_bytes")
        if isinstance(shm, int) and shm < SHM_MIN:
            findings.append(Finding("nccl.shm-small", Level.WARNING, f"{name}: /dev/shm is {_size(shm)}",
                                    detail="NCCL's shared-memory transport and DataLoader workers need more; NCCL fails with 'unhandled system error'",
                                    fix="docker run --shm-size=16g (or --ipc=host); Kubernetes: an emptyDir with medium: Memory at /dev/shm",
                                    area="network", evidence=[Evidence("file", "/proc/mounts", str(_get(net, "shm", "mount")))], subject=name))
        lock = _get(net, "memlock", "soft_bytes")
        if isinstance(lock, int) and lock < MEMLOCK_MIN:
            findings.append(Finding("nccl.memlock-low", Level.INFO, f"{name}: ulimit -l is {_size(lock)}",
                                    detail="InfiniBand/RoCE transports pin memory; a small limit makes NCCL fall back or fail",
                                    fix="raise memlock to unlimited (/etc/security/limits.conf, docker --ulimit memlock=-1)",
                                    area="network", evidence=[Evidence("file", "/proc/self/limits", f"Max locked memory {lock}")], subject=name))
    summary = "ready" if not any(f.level is not Level.INFO for f in findings) else \
        f"{sum(f.level is not Level.INFO for f in findings)} problem(s)"
    return Area("network", "Network", summary, details, findings)


def collectives_area(backend: str, checks: list[dict], rows: list[dict], latency: dict, skipped: str, world: int) -> Area:
    name = f"collectives.{backend}"
    title = f"Collectives ({backend})"
    if skipped:
        return Area(name, title, f"skipped: {skipped}",
                    findings=[Finding("fleet.collective-skipped", Level.INFO, f"{backend} collectives skipped: {skipped}", area=name, subject=backend)])
    findings = []
    for c in checks:
        for op, problem in (c.get(backend) or {}).items():
            if problem:
                findings.append(Finding("fleet.collective-failed", Level.ERROR, f"{backend} {op} wrong on rank {c['rank']}: {problem}",
                                        fix="run `doctor explain` on the rank's log; check NCCL_DEBUG=INFO output",
                                        area=name, subject=f"{backend}:{op}:{c['rank']}"))
    details = [f"latency ({8} B): " + ", ".join(f"{op} {us:.0f} µs" for op, us in latency.items())] if latency else []
    details += bandwidth_table(rows)
    best = max((r["busbw_gbs"] for r in rows if r["op"] == "all_reduce"), default=0.0)
    summary = (f"all_reduce, all_gather, broadcast correct on {world} rank{'s' * (world != 1)}; all_reduce busbw up to {best:.2f} GB/s"
               if not findings else f"{len(findings)} wrong result(s)")
    return Area(name, title, summary, details, findings)


def bandwidth_table(rows: list[dict]) -> list[str]:
    cells = [{"op": r["op"], "size": _size(r["bytes"]), "time": f"{r['seconds'] * 1e6:.0f} us",
              "algbw": f"{r['algbw_gbs']:.3f} GB/s", "busbw": f"{r['busbw_gbs']:.3f} GB/s"} for r in rows]
    return table(cells, ("op", "size", "time", "algbw", "busbw")) if cells else []


GRAD_TOLERANCE = 1e-4  # float32 sums in another order


def problems(result: dict[str, Any]) -> list[str]:
    """What is wrong with a data_parallel_smoke result (pure)."""
    if result.get("error"):
        return [result["error"]]
    out = []
    if result["grad_error"] is None or not result["grad_error"] <= GRAD_TOLERANCE:
        out.append(f"the all_reduce-averaged gradient differs from the full-batch gradient by {result['grad_error']:.3g}")
    if result["param_spread"] is None or result["param_spread"] != 0.0:
        out.append(f"the ranks' parameters diverged (max spread {result['param_spread']:.3g})")
    if not (result["last_loss"] is not None and result["last_loss"] < result["first_loss"]):
        out.append(f"the loss did not fall: {result['first_loss']:.4f} → {result['last_loss']:.4f}")
    return out


def training_area(results: list[dict]) -> Area:
    findings = []
    for r in results:
        for p in problems(r["training"]):
            findings.append(Finding("fleet.train-failed", Level.ERROR, f"data-parallel step on rank {r['rank']}: {p}",
                                    fix="see the Collectives area; run `doctor smoke` on the node", area="training",
                                    subject=str(r["rank"])))
    t = results[0]["training"]
    if findings:
        return Area("training", "Data-parallel training", f"{len(findings)} problem(s)", findings=findings)
    return Area("training", "Data-parallel training",
                f"gradients average across {t['ranks']} rank{'s' * (t['ranks'] != 1)} (max |error| {t['grad_error']:.1e} vs full batch); "
                f"parameters identical; loss {t['first_loss']:.3f} → {t['last_loss']:.3f} in {t['steps']} steps")


def fleet_report(launch: dict, payloads: list[dict], results: list[dict], gloo: dict, nccl: dict) -> Report:
    names = node_names(payloads)
    by_node = ranks_of(payloads, names)
    nodes = node_problems_area(names, payloads)
    nodes.details = table([node_row(n, by_node[n], payloads[r]["report"]) for r, n in names.items()], TABLE_COLUMNS)
    diffs, data = differences_area(names, payloads)
    world = len(payloads)
    areas = [nodes, diffs, network_area(names, payloads, world),
             collectives_area("gloo", results, gloo.get("sweep") or [], gloo.get("latency") or {}, "", world),
             collectives_area("nccl", results, nccl.get("sweep") or [], nccl.get("latency") or {}, nccl.get("skipped") or "", world),
             training_area(results)]
    facts = {"launch": launch, "nodes": [{"name": n, "ranks": by_node[n], "host": payloads[r]["host"],
                                          "network": payloads[r]["network"], "report": payloads[r]["report"]}
                                         for r, n in names.items()],
             "comparison": data, "collectives": {"gloo": gloo, "nccl": nccl},
             "ranks": [{k: r[k] for k in ("rank", "gloo", "nccl", "training")} for r in results]}
    return Report("fleet", facts, areas, doctor_version=__version__)


def aborted_report(launch: dict, reason: str, finding_id: str = "fleet.rank-missing") -> Report:
    """Rank 0's report when a phase could not complete (a rank never joined, a collective failed)."""
    f = Finding(finding_id, Level.ERROR, reason,
                fix="start `doctor fleet` on every node with the same launcher settings; check that each node can reach "
                    f"{launch.get('master_addr')}:{launch.get('master_port')}, then read the missing node's own output",
                area="ranks", evidence=[Evidence("derived", "rendezvous store", reason)])
    return Report("fleet", {"launch": launch}, [Area("ranks", "Ranks", reason, findings=[f])], doctor_version=__version__)


def _get(d: dict, *keys: str) -> Any:
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _size(n: Any, none: str = "?") -> str:
    return human_bytes(n, compact=True) if isinstance(n, int) else none
