"""The API client's lean kubernetes-asyncio: none of its generated classes imported to talk to a
cluster, all of them still there for code that asks (each case in a fresh interpreter: the test
process has the whole package imported already)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_client_loads_no_generated_api_or_model_module() -> None:
    out = _python("""
        import sys
        from services.kube.client import Kube, configuration
        from kubernetes_asyncio import config
        generated = [m for m in sys.modules if m.startswith(("kubernetes_asyncio.client.models.",
                                                             "kubernetes_asyncio.client.api."))]
        print(len(generated), callable(config.load_kube_config), Kube.__name__)
    """)
    assert out == "0 True Kube"


def test_generated_classes_resolve_when_asked_for() -> None:
    out = _python("""
        from services.kube.client import Kube
        import kubernetes_asyncio
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client import V1ObjectMeta
        print(client.CoreV1Api.__name__, client.models.V1Pod.__name__, V1ObjectMeta.__name__,
              kubernetes_asyncio.__version__ == client.__version__)
        try:
            client.NoSuchClass
        except AttributeError as exc:
            print("missing:", "NoSuchClass" in str(exc))
    """)
    assert out.splitlines() == ["CoreV1Api V1Pod V1ObjectMeta True", "missing: True"]


def test_an_earlier_whole_import_is_left_as_it_is() -> None:
    out = _python("""
        import kubernetes_asyncio.client
        from services.kube import leanimport
        print(leanimport.install(), hasattr(kubernetes_asyncio.client, "CoreV1Api"))
    """)
    assert out == "False True"
