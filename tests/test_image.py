"""deploy/Dockerfile without a Docker engine: what can be checked offline, is.

The image is pinned, runs as the chart's non-root user on a read-only root filesystem, includes
the otlp extra, starts what the chart and docker-compose.yml ask it to start, and carries the
name the chart pulls by default — the one `make image` builds and README says to build.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
CHART = ROOT / "charts" / "tessera"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def args_defaults() -> dict[str, str]:
    return dict(rest.split("=", 1) for word, rest in instructions() if word == "ARG" and "=" in rest)


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_base_image_is_pinned_to_an_exact_version_or_digest() -> None:
    args = args_defaults()
    stages = set()
    froms = [rest for word, rest in instructions() if word == "FROM"]
    assert froms
    for rest in froms:
        ref, *alias = rest.split()
        ref = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], ref)
        if ref in stages:
            continue  # an earlier stage of this file
        if alias:
            stages.add(alias[-1])
        pinned = "@sha256:" in ref or re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+(-[\w.-]+)?", ref)
        assert pinned, f"FROM {ref}: pin an exact version (x.y.z) or a digest"


def test_it_runs_as_the_charts_non_root_user() -> None:
    users = [rest for word, rest in instructions() if word == "USER"]
    assert users, "no USER: the container would run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, "a numeric uid lets runAsNonRoot verify it"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert int(uid) == values["podSecurityContext"]["runAsUser"]
    assert int(gid) == values["podSecurityContext"]["runAsGroup"]


def test_it_writes_nothing_outside_tmp_on_a_read_only_root_filesystem() -> None:
    env = " ".join(rest for word, rest in instructions() if word == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "HOME=/tmp" in env
    runs = " ".join(rest for word, rest in instructions() if word == "RUN")
    assert "compileall" in runs  # bytecode exists already: Python need not write it
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["securityContext"]["readOnlyRootFilesystem"] is True
    assert "mountPath: /tmp" in (CHART / "templates" / "deployments.yaml").read_text()


def test_it_installs_the_otlp_extra() -> None:
    runs = " ".join(rest for word, rest in instructions() if word == "RUN")
    assert "'.[otlp]'" in runs
    assert "otlp" in pyproject()["project"]["optional-dependencies"]


def test_the_entrypoint_starts_what_the_chart_and_compose_name() -> None:
    """`python -m <module>`: every module the chart's component table and docker-compose.yml
    pass is a service with a `__main__`; the default command is the `tessera` console script."""
    entry = [rest for word, rest in instructions() if word == "ENTRYPOINT"][-1]
    assert entry == '["python", "-m"]'
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    modules = set(re.findall(r"module: ([\w.]+),", helpers))
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    modules |= {s["command"][0] for s in compose.values() if "build" in s}
    assert len(modules) == 5
    for module in modules:
        assert importlib.util.find_spec(f"{module}.__main__") is not None, module
    cmd = yaml.safe_load([rest for word, rest in instructions() if word == "CMD"][-1])
    script = pyproject()["project"]["scripts"]["tessera"]
    assert script == f"{cmd[0]}:main"
    assert callable(importlib.import_module(cmd[0]).main)


def test_the_charts_default_image_is_what_make_image_builds_and_readme_says() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = pyproject()["project"]["version"]
    assert chart["appVersion"] == version  # the default tag follows the package version
    default = f"{values['image']['repository']}:{values['image']['tag'] or chart['appVersion']}"
    built = subprocess.run(["make", "-s", "-n", "image"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout  # fmt: skip
    assert f"-t {default} " in built and "-f deploy/Dockerfile" in built
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert {s["image"] for s in compose.values() if "build" in s} == {default}
    readme = (ROOT / "README.md").read_text()
    assert "make image" in readme and default in readme


def test_the_build_context_keeps_the_venv_and_state_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".tessera" in ignored
    for word, rest in instructions():
        if word == "COPY" and "--from" not in rest:
            for src in rest.split()[:-1]:
                assert (ROOT / src).exists(), src
