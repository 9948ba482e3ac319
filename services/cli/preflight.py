"""`tessera up --kubeconfig`'s look at what already schedules the cluster: the chart's preflight
(`charts/tessera/templates/preflight.yaml`) for the command line.

Started beside the Volcano or HAMi scheduler it replaces, Tessera would act on the objects they
act on: two job controllers making one Job's pods, two schedulers binding the pods of one
scheduler name, two bookkeepers of the same cards. `helm install` refused that; `tessera up
--kubeconfig` — the README's first cluster example — did not look, and took `schedulerName:
volcano` by default. Now it lists the Deployments (with the user's rights, as helm does) and
refuses, naming each one found and the ways out: only Tessera's own name beside a Volcano that
stays (`--scheduler-name tessera`), or `--skip-preflight`.

A Deployment scaled to 0 runs nothing and is not counted. Volcano's scheduler and controllers
serve the names of their `--scheduler-name` arguments (`volcano` without one); HAMi's scheduler
books the cards Tessera books whatever the names.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

DEPLOYMENTS = "/apis/apps/v1/deployments"
SKIP_FLAG = "--skip-preflight"
VOLCANO_DEFAULT_NAME = "volcano"
HAMI_EXTENDER = "vgpu-scheduler-extender"


def served_names(container: dict[str, Any]) -> set[str]:
    """The scheduler names a Volcano component's container serves: each `--scheduler-name`
    argument (`--scheduler-name=x` or `--scheduler-name x`), else Volcano's default."""
    words = [str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]]
    names: set[str] = set()
    for i, word in enumerate(words):
        if word.startswith("--scheduler-name="):
            names.add(word.split("=", 1)[1])
        elif word == "--scheduler-name" and i + 1 < len(words):
            names.add(words[i + 1])
    return names or {VOLCANO_DEFAULT_NAME}


def findings(deployments: Iterable[dict[str, Any]], scheduler_names: Collection[str]) -> list[str]:
    """What runs that Tessera, taking `scheduler_names`, would fight with, one line each."""
    found: list[str] = []
    for d in deployments:
        meta, spec = d.get("metadata") or {}, d.get("spec") or {}
        if spec.get("replicas", 1) == 0:
            continue
        where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        for c in ((spec.get("template") or {}).get("spec") or {}).get("containers") or []:
            image = str(c.get("image") or "")
            if "vc-scheduler" in image or "vc-controller-manager" in image:
                shared = sorted(served_names(c) & set(scheduler_names))
                if not shared:
                    continue
                what = ("Volcano's scheduler", "binds") if "vc-scheduler" in image else \
                    ("Volcano's controllers", "make the Volcano Jobs' pods and PodGroups of")  # fmt: skip
                found.append(f"{what[0]} (Deployment {where}, {image}) {what[1]} the pods named "
                             f"schedulerName: {', '.join(shared)}")  # fmt: skip
            elif "hami" in image and c.get("name") == HAMI_EXTENDER:
                found.append(f"HAMi's scheduler (Deployment {where}, {image}) books the cards Tessera books, "
                             "and its webhook gives device pods schedulerName hami-scheduler")  # fmt: skip
    return found


def refusal(found: list[str], scheduler_names: Collection[str]) -> str:
    """The message `tessera up` stops with (the chart's, with the command line's flags)."""
    lines = "\n  - ".join(found)
    keep = "" if set(scheduler_names) == {"tessera"} else \
        "or keep Volcano and give Tessera only its own name (--scheduler-name tessera; beside HAMi's scheduler " \
        "no name helps), "  # fmt: skip
    return ("Tessera replaces Volcano's scheduler and controllers and HAMi's scheduler (HAMi's device plugins and "
            "Volcano's CRDs stay), and would act on the same objects as what runs on this cluster:\n"
            f"  - {lines}\n"
            "Uninstall them first (e.g. `helm uninstall volcano -n volcano-system`; HAMi reinstalled with "
            f"scheduler.enabled=false, keeping its device plugin), {keep}"
            f"or start anyway with {SKIP_FLAG}. README: \"Moving from Volcano and HAMi\".")  # fmt: skip


async def look(kube: Any, scheduler_names: Collection[str]) -> list[str]:
    """The cluster's Deployments, every namespace, each page (the chart's `lookup`)."""
    items: list[dict[str, Any]] = []
    cont = ""
    while True:
        query = {"limit": "500", **({"continue": cont} if cont else {})}
        body = await kube.get(DEPLOYMENTS, **query)
        items.extend(body.get("items") or [])
        cont = str((body.get("metadata") or {}).get("continue") or "")
        if not cont:
            return findings(items, scheduler_names)
