"""Where Tessera's cards come from, for the two places that must say it when they are missing.

Cards are made only from HAMi's register annotations (written by HAMi's device plugins, or by
Tessera's own node side with `nodeAgent.devicePlugin: tessera`), never from a node's
allocatable count: the count alone has no uuid, memory or split count to book slices on. A node
running only the vendor's plugin (Huawei's ascend-device-plugin: `huawei.com/Ascend910: 8`;
NVIDIA's: `nvidia.com/gpu: 8`) therefore has no card for Tessera, although its kubelet serves
them. The node agent's problem for that node (`kube.nodes`) and a waiting pod's explanation
(`scheduling.explain`) use the words here, so both name the same annotation and the same fix.
"""

from __future__ import annotations

from contracts import hami

#: Per vendor: the annotation HAMi's device plugin registers the node's cards in, and that plugin.
_HAMI = {
    "huawei": (hami.ascend_register_key("<CommonWord>"), "HAMi's ascend-device-plugin"),
    "nvidia": (hami.NVIDIA_REGISTER, "HAMi's device plugin (hami-device-plugin)"),
}

BOOKED_FROM = ("Tessera books cards only from HAMi's registration, which HAMi's device plugins "
               "and Tessera's own node side write")  # fmt: skip


def vendor_of(resource: str) -> str | None:
    """The family whose registration a served name needs (None: one Tessera does not book)."""
    if resource.startswith("huawei.com/Ascend"):
        return "huawei"
    if resource.startswith("nvidia.com/"):
        return "nvidia"
    return None


def register_annotation(vendor: str) -> str:
    return _HAMI[vendor][0] if vendor in _HAMI else "HAMi's register annotation"


def install(vendor: str) -> str:
    """What to run on such a node: HAMi's plugin or Tessera's node side, in the vendor's place
    (two plugins registering one name with the kubelet cannot both serve it)."""
    plugin = _HAMI[vendor][1] if vendor in _HAMI else "HAMi's device plugin"
    return (f"install {plugin} in place of the vendor's, or Tessera's node side (chart value "
            "nodeAgent.devicePlugin: tessera)")  # fmt: skip
