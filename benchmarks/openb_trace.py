"""Loading the openb cluster and pod traces and building FGD's arrival sequence.

Kept apart from the replay loop so tests can build small clusters from the same parsers.
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Sequence
from pathlib import Path

from services.core.placement import NodeView, Request

NODE_FILE = "openb_node_list_gpu_node.csv"
TRACE_PREFIX = "openb_pod_list_"
#: FGD inflates the shuffled trace with resampled pods up to this multiple of GPU capacity.
TUNE = 1.3


def data_dir() -> Path:
    """The openb data folder: ``$TESSERA_OPENB_DIR`` or ``shared/data/openb`` beside the repo."""
    env = os.environ.get("TESSERA_OPENB_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data" / "openb"


def available_traces(root: Path | None = None) -> list[str]:
    root = root or data_dir()
    return sorted(p.stem[len(TRACE_PREFIX) :] for p in root.glob(f"{TRACE_PREFIX}*.csv"))


def load_nodes(root: Path | None = None) -> list[NodeView]:
    """The 1213 GPU nodes, all empty, in file order."""
    path = (root or data_dir()) / NODE_FILE
    with path.open(newline="") as fh:
        return [
            NodeView(
                row["sn"],
                int(row["cpu_milli"]),
                int(row["memory_mib"]),
                row["model"],
                (1000,) * int(row["gpu"]),
            )
            for row in csv.DictReader(fh)
        ]


def load_trace(name: str, root: Path | None = None) -> list[Request]:
    """Pods of ``openb_pod_list_<name>.csv`` as requests; identical requests share one object."""
    path = (root or data_dir()) / f"{TRACE_PREFIX}{name}.csv"
    interned: dict[Request, Request] = {}
    out: list[Request] = []
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            spec = (row.get("gpu_spec") or "").strip()
            num = int(row["num_gpu"])
            req = Request(
                int(row["cpu_milli"]),
                int(row["memory_mib"]),
                num,
                int(row["gpu_milli"]) if num else 0,
                frozenset(spec.split("|")) if spec and num else None,
            )
            out.append(interned.setdefault(req, req))
    return out


def capacity_milli(nodes: Sequence[NodeView]) -> int:
    return sum(len(n.cards) for n in nodes) * 1000


def arrival_sequence(
    trace: Sequence[Request], capacity: int, seed: int, tune: float = TUNE
) -> list[Request]:
    """FGD's protocol: shuffle, then append pods drawn with replacement until the total card
    request reaches ``tune`` × capacity."""
    rng = random.Random(seed)
    pods = list(trace)
    rng.shuffle(pods)
    total = sum(p.gpu_milli for p in pods)
    target = tune * capacity
    while total < target:
        p = rng.choice(trace)
        pods.append(p)
        total += p.gpu_milli
    return pods
