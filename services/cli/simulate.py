"""`tessera simulate`: run the scheduling cores in-process on an inventory and a workload.

    tessera simulate --inventory INV.yaml --workload W.yaml [--workload W2.yaml …]
                     [--scheduler-conf CONF.yaml]
                     [--device-config DEV.yaml] [--cycles N] [--until SECONDS]
                     [--report OUT.json] [--events OUT.jsonl] [-o table|json|yaml]
    tessera simulate --replay OUT.jsonl --report R2.json

It prints a summary (pods by phase, cards in use, and every pod's outcome) unless `-o json|yaml`
asks for the whole report on stdout; `--report` writes that report to a file either way.
Exit 0 unless an input cannot be read (then one line naming the file and the problem, exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from services.cli.progress import progress


class InputError(Exception):
    pass


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    from services.core.simulate.engine import MAX_SESSIONS_PER_INSTANT
    from services.core.simulate.jsonl import NotALog, read_jsonl, write_jsonl
    from services.core.simulate.report import build_report, undecodable_warning

    try:
        if args.replay:
            try:
                messages = read_jsonl(Path(args.replay))
            except NotALog as exc:
                raise InputError(str(exc)) from None
            except OSError as exc:
                raise InputError(f"{args.replay}: cannot read it: {exc.strerror or exc}") from None
        else:
            if not args.inventory or not args.workload:
                raise InputError("--inventory and --workload are required (or --replay)")
            sim = _build(args)
            with progress("simulating: sessions", args.cycles) as advance:
                sim.run(on_session=lambda sessions, _now: advance(sessions))
            messages = sim.log.messages()
            for when in sim.unsettled:
                print(f"tessera simulate: warning: at t={when:g}s the scheduler had not settled after "
                      f"{MAX_SESSIONS_PER_INSTANT} sessions, each of which changed the cluster (a loop "
                      "of evictions and placements?); the run went on to the next event — `tessera "
                      "explain` on the --events log shows what the sessions did", file=sys.stderr)  # fmt: skip
            if args.events:
                write_jsonl(Path(args.events), messages)
    except InputError as exc:
        print(f"tessera simulate: {exc}", file=sys.stderr)
        return 2
    report = build_report(messages)
    if warning := undecodable_warning(report):
        print(f"tessera simulate: {warning}", file=sys.stderr)
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    if args.output == "json":
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=False) + "\n")
    elif args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(report, sort_keys=False))
    else:
        print(summary(report))
        if args.report:
            print(f"report written to {args.report}")
    return 0


def summary(report: dict[str, Any]) -> str:
    """What a person wants first: how far it got, how full the cards are, each pod's outcome."""
    from services.cli.get import POD_COLUMNS, _table_view, render

    m = report["metrics"]
    phases = ", ".join(f"{n} {phase}" for phase, n in m["pods_by_phase"].items()) or "no pods"
    head = (f"{m['cycles']} cycles; pods: {phases}; cards in use {m['cards_in_use']}/{m['cards_total']}, "
            f"card memory allocated {100 * m['card_memory_allocated_ratio']:.1f}%, "
            f"{m['evictions']} evictions, {m['placements_rejected']} placements rejected")  # fmt: skip
    out = head + "\n" + render(_table_view("pods", report["pods"]), POD_COLUMNS, "table")
    # a refused Queue or Job has no pod to show it: without these lines a workload refused
    # whole (the article's Queue as written, its Job naming that queue) printed an empty table
    refused = [f"queue {q['name']} rejected: {q['reason']}" for q in report.get("queues", [])
               if q.get("state") == "Rejected"]  # fmt: skip
    refused += [f"{j.get('kind') or 'job'} {j['namespace']}/{j['name']} rejected: {j['reason']}"
                for j in report.get("jobs", []) if j.get("phase") == "Rejected"
                and not any(p.get("job") == j["name"] and p.get("namespace") == j["namespace"]
                            for p in report["pods"])]  # fmt: skip
    return "\n".join([out, *refused])


def _build(args: argparse.Namespace) -> Any:
    from services.core.devices import CatalogueError, DeviceConfig, build_vendors, load_catalogue
    from services.core.scheduling.config import ConfigError, default_conf, not_run, parse_conf
    from services.core.scheduling.decide import plugin_names
    from services.core.scheduling.record import configured
    from services.core.simulate.engine import load_simulation
    from services.core.simulate.inventory import InventoryError, load_hypernodes, load_inventory
    from services.core.workload import ManifestError, admit, load_documents
    from services.core.workload.cardroom import largest_cards
    from services.core.workload.devicerequests import hami_parser

    catalogue = None
    device_text = conf_text = ""
    if args.device_config:
        try:
            device_text = _read(args.device_config, "device config")
            catalogue = load_catalogue(device_text)
        except (CatalogueError, ValueError) as exc:
            raise InputError(f"{args.device_config}: {exc}") from None
        for line in catalogue.not_acted_on:
            print(f"warning: {args.device_config}: {line}", file=sys.stderr)
    vendors = build_vendors(catalogue)
    conf = default_conf()
    if args.scheduler_conf:
        try:
            conf_text = _read(args.scheduler_conf, "scheduler configuration")
            conf = parse_conf(conf_text)
        except ConfigError as exc:
            raise InputError(f"{args.scheduler_conf}: {exc}") from None
        for line in not_run(conf, plugin_names()):
            print(f"warning: {args.scheduler_conf}: {line}", file=sys.stderr)
    if catalogue is not None:
        conf = dataclasses.replace(conf, vendors=vendors)  # the scheduler fits on it too
    try:
        inv_doc = yaml.safe_load(_read(args.inventory, "inventory"))
        nodes = load_inventory(inv_doc, vendors.catalogue)
        hypernodes = load_hypernodes(inv_doc)
    except (yaml.YAMLError, InventoryError) as exc:
        raise InputError(f"{args.inventory}: {str(exc).splitlines()[0]}") from None
    from services.cli.control import manifest_files

    docs = []
    for path in manifest_files(args.workload):  # in the order given, as `apply -f a -f b` reads them
        try:
            docs.extend(load_documents(_read(path, "workload")))
        except ManifestError as exc:
            raise InputError(f"{path}: {exc}") from None
    largest = largest_cards(c for n in nodes for c in n.cards)  # as the admission service knows them
    workload = admit(docs, hami_parser(vendors), vendors.resource_names(), largest=largest)
    if hypernodes:  # the inventory's first: a workload's HyperNode of the same name replaces it
        workload = dataclasses.replace(workload, hypernodes=(*hypernodes, *workload.hypernodes))
    ds = conf.plugin("deviceshare")
    dev_conf = DeviceConfig()
    if ds is not None:
        dev_conf = DeviceConfig(
            card_policy=str(ds.arguments.get("deviceshare.SchedulePolicy") or "spread")
            if str(ds.arguments.get("deviceshare.SchedulePolicy") or "spread")
            in ("binpack", "spread")
            else "spread",
            node_policy=str(ds.arguments.get("deviceshare.NodeSchedulePolicy") or "binpack"),
        )
    return load_simulation(conf, vendors, nodes, workload, until=args.until, cycles=args.cycles,
                           device_config=dev_conf,
                           config=configured(conf_text, device_text, scheduler="simulate", mode="simulate"))  # fmt: skip


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "simulate", help="run the scheduler in-process on an inventory + workload"
    )
    p.add_argument("--inventory", help="nodes and their cards (YAML, as examples/inventory.yaml)")
    p.add_argument("--workload", action="append", metavar="FILE",
                   help="Queues, Jobs, PodGroups, Pods to submit (YAML; a directory: every .yaml/.yml/.json "
                        "in it); repeatable, submitted in the order given")  # fmt: skip
    p.add_argument("--scheduler-conf", help="volcano-scheduler.conf (default: Volcano's defaults)")
    p.add_argument("--device-config", help="HAMi device-config.yaml (default: HAMi's chart values)")
    p.add_argument("--cycles", type=int, help="stop after this many scheduling sessions")
    p.add_argument("--until", type=float, help="stop at this virtual time (seconds)")
    p.add_argument("--report", help="write the full report (pods, jobs, queues, cards, metrics) as JSON here")
    p.add_argument("--events", help="write the simulated log as JSONL here (for --replay)")
    p.add_argument("--replay", help="rebuild the report from a JSONL log instead of simulating")
    p.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table",
                   help="table: a summary (default); json/yaml: the full report on stdout")  # fmt: skip
    p.set_defaults(func=run)
    return p
