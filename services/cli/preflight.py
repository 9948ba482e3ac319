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
books the cards Tessera books whatever the names. Beside a Volcano that stays, Volcano's job
controller still reconciles every Volcano Job whatever its schedulerName (only its PodGroup
controller reads `--scheduler-name`): that is no refusal — Tessera then admits no Volcano Job
and schedules what that controller makes — but `up` says so (`notes`), as the chart's NOTES do.
The steps of a refusal are the chart's and README's, HAMi's per Deployment found: they told to
reinstall HAMi with `scheduler.enabled=false`, a value HAMi's chart does not have.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
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


@dataclass
class Survey:
    """What runs that Tessera, taking its scheduler names, would fight with (`found`, one line
    each), what it leaves to what runs (`notes`), and the HAMi scheduler Deployments found
    (namespace, name: each is deleted by name)."""

    found: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    hami: list[tuple[str, str]] = field(default_factory=list)
    volcano: bool = False


def survey(deployments: Iterable[dict[str, Any]], scheduler_names: Collection[str]) -> Survey:
    out = Survey()
    for d in deployments:
        meta, spec = d.get("metadata") or {}, d.get("spec") or {}
        if spec.get("replicas", 1) == 0:
            continue
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        where = f"{ns}/{name}"
        for c in ((spec.get("template") or {}).get("spec") or {}).get("containers") or []:
            image = str(c.get("image") or "")
            if "vc-scheduler" in image or "vc-controller-manager" in image:
                shared = sorted(served_names(c) & set(scheduler_names))
                if not shared:
                    if "vc-controller-manager" in image:
                        out.notes.append(
                            f"Volcano's job controller (Deployment {where}, {image}) reconciles every Volcano Job "
                            "whatever its schedulerName: Volcano Jobs and their Commands stay its own; Tessera "
                            "schedules the PodGroups and pods it makes for a Job whose pods say "
                            f"schedulerName: {', '.join(sorted(scheduler_names))}")  # fmt: skip
                    continue
                out.volcano = True
                what = ("Volcano's scheduler", "binds") if "vc-scheduler" in image else \
                    ("Volcano's controllers", "make the Volcano Jobs' pods and PodGroups of")  # fmt: skip
                out.found.append(f"{what[0]} (Deployment {where}, {image}) {what[1]} the pods named "
                                 f"schedulerName: {', '.join(shared)}")  # fmt: skip
            elif "hami" in image and c.get("name") == HAMI_EXTENDER:
                out.hami.append((ns, name))
                out.found.append(f"HAMi's scheduler (Deployment {where}, {image}) books the cards Tessera books, "
                                 "and its webhook gives device pods schedulerName hami-scheduler")  # fmt: skip
    return out


def findings(deployments: Iterable[dict[str, Any]], scheduler_names: Collection[str]) -> list[str]:
    """What runs that Tessera, taking `scheduler_names`, would fight with, one line each."""
    return survey(deployments, scheduler_names).found


def refusal(seen: Survey, scheduler_names: Collection[str]) -> str:
    """The message `tessera up` stops with: the chart's, its steps README's ("Moving from
    Volcano and HAMi"), with the command line's flags."""
    steps: list[str] = []
    if seen.volcano:
        keep = "" if set(scheduler_names) == {"tessera"} else \
            "; or keep Volcano and give Tessera only its own name: --scheduler-name tessera"  # fmt: skip
        steps.append("Volcano: helm uninstall volcano -n volcano-system   (its CRDs stay, and your Queues and Jobs "
                     f"with them){keep}")  # fmt: skip
    for ns, name in seen.hami:
        steps.append("HAMi (its device plugins stay; its chart has no switch for the scheduler, so its Deployment "
                     f"is deleted):\n      helm upgrade hami hami-charts/hami -n {ns} --reuse-values --set "
                     f"scheduler.admissionWebhook.enabled=false\n      kubectl -n {ns} delete deployment {name}   "
                     "(a later helm upgrade of HAMi renders it again: delete it again)")  # fmt: skip
    lines = "\n  - ".join(seen.found)
    first = "\n  - ".join(steps)
    return ("Tessera replaces Volcano's scheduler and controllers and HAMi's scheduler (HAMi's device plugins and "
            "Volcano's CRDs stay), and would act on the same objects as what runs on this cluster:\n"
            f"  - {lines}\n"
            f"First:\n  - {first}\n"
            f"Or start anyway with {SKIP_FLAG}. README: \"Moving from Volcano and HAMi\".")  # fmt: skip


async def look(kube: Any, scheduler_names: Collection[str]) -> Survey:
    """The cluster's Deployments, every namespace, each page (the chart's `lookup`), surveyed."""
    items: list[dict[str, Any]] = []
    cont = ""
    while True:
        query = {"limit": "500", **({"continue": cont} if cont else {})}
        body = await kube.get(DEPLOYMENTS, **query)
        items.extend(body.get("items") or [])
        cont = str((body.get("metadata") or {}).get("continue") or "")
        if not cont:
            return survey(items, scheduler_names)
