"""kubernetes-asyncio without its generated API and model classes.

Importing any part of kubernetes-asyncio runs its package `__init__`s, which import every
generated API class and all ~770 model modules: ~0.45 s of CPU at the start of each of the five
services (issue 29's profile), for classes Tessera never uses — it speaks raw JSON and needs only
the configuration, the kubeconfig / in-cluster loaders and the REST client's aiohttp session.

`install()` puts the three packages (`kubernetes_asyncio`, its `client` and `client.models`) in
`sys.modules` with their real specs and search paths but without running their `__init__`, so
submodules still import as usual. A name the lean package does not have yet is looked up the
usual way: the `client` names the loaders need come from their own modules; anything else runs
the package's real `__init__` first, so code that uses the generated classes (the tests' cluster
side, say) sees the complete package, only later.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

ROOT = "kubernetes_asyncio"
#: `kubernetes_asyncio.client` names the config loaders and our client import, and where they live
_CLIENT_NAMES = {
    "ApiClient": "api_client",
    "Configuration": "configuration",
    "ApiException": "exceptions",
    "ApiValueError": "exceptions",
    "rest": None,
    "configuration": None,
    "api_client": None,
    "exceptions": None,
}


def _lean(name: str, direct: dict[str, str | None], within: list[str]) -> ModuleType | None:
    # found on the parent's search path: `find_spec` of a dotted name would import the parent,
    # whose `__init__` imports everything
    spec = importlib.machinery.PathFinder.find_spec(name, within)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return None
    module = importlib.util.module_from_spec(spec)
    state = {"full": False}

    def complete() -> None:
        if not state["full"]:
            state["full"] = True
            spec.loader.exec_module(module)  # type: ignore[union-attr]

    def __getattr__(attr: str) -> object:  # a module's attribute hook (PEP 562)
        if attr.startswith("__") and attr not in ("__all__", "__version__", "__project__"):
            raise AttributeError(attr)  # the import system's probes: what a bare module has
        if attr in direct:
            sub = importlib.import_module(f"{name}.{direct[attr] or attr}")
            return sub if direct[attr] is None else getattr(sub, attr)
        if attr in {"client", "config", "dynamic", "stream", "utils", "watch", "models", "api"}:
            try:
                return importlib.import_module(f"{name}.{attr}")
            except ModuleNotFoundError:
                pass
        complete()
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules[name] = module
    return module


def install() -> bool:
    """Lean packages in place, unless kubernetes-asyncio was imported already (then nothing
    changes); True when they are."""
    if ROOT in sys.modules:
        return False
    root = importlib.util.find_spec(ROOT)  # a top-level name: nothing is imported
    client = models = None
    if root is not None and root.submodule_search_locations is not None:
        client = _lean(f"{ROOT}.client", _CLIENT_NAMES, list(root.submodule_search_locations))
        if client is not None:
            models = _lean(f"{ROOT}.client.models", {}, list(client.__path__))
    if client is None or models is None:  # a layout we do not know: the usual import, whole
        for name in (f"{ROOT}.client", f"{ROOT}.client.models"):
            sys.modules.pop(name, None)
        return False
    client.models = models  # type: ignore[union-attr]
    # the root's own `__init__` now, the lean packages in place: imported lazily, its config
    # loaders would ask the client for `ApiClient` halfway through importing it
    importlib.import_module(ROOT)
    return True
