"""HAMi's card-pinning annotations that pin nothing: a mistyped card type, or a key no scheduler reads.

`hami.io/use-<type>-uuid` / `hami.io/no-use-<type>-uuid` are read only under the exact common
word of the card type the pod asks for (HAMi's Ascend device reads its own type's key); `hami.io/use-Ascend910B-uuid` on a 910B3 pod is no
key HAMi reads, so the pin was ignored without a word (issue 26 item 5). The pod is still
accepted — HAMi accepts it — with a warning naming the key and the type it probably meant.

`nvidia.com/use-gpuindexes` / `nvidia.com/nouse-gpuindexes` (a card's index on its node, a comma
list) are in HAMi's examples (`examples/nvidia/specify_index_to_use.yaml`,
`specify_index_not_use.yaml`) but not in its scheduler: the pull requests adding them
(Project-HAMi/HAMi #1313, open; #1314 and #1316, closed) were never merged, and the NVIDIA
`Fit` filters cards by `use-gputype` and `use-gpuuuid` only (`fit_checks.go`, `CheckUUID`). HAMi
gives such a pod any card, and so does Tessera; it says so, and names the key that does pin.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

from contracts.workloads import DeviceRequest
from services.core.devices.ascend import nouse_uuid_annotation, use_uuid_annotation
from services.core.devices.violations import Violation

_PIN = re.compile(r"^hami\.io/(no-)?use-(.+)-uuid$")
#: NVIDIA index pins HAMi's examples show and its scheduler does not read → the key that pins
NVIDIA_INDEX_PINS = {
    "nvidia.com/use-gpuindexes": "nvidia.com/use-gpuuuid",
    "nvidia.com/nouse-gpuindexes": "nvidia.com/nouse-gpuuuid",
}


def mistyped_pins(annotations: Mapping[str, str], devices: Iterable[DeviceRequest], where: str) -> list[Violation]:
    """A warning for each pinning key that names a card type none of the pod's requests reads
    (a 910B3 request reads `hami.io/use-Ascend910B3-uuid`, a family request its members')."""
    read = sorted({t for d in devices if d.vendor == "huawei" for t in (d.allowed_types or (d.type,))})
    out = []
    for key, value in sorted(annotations.items()):
        m = _PIN.match(key)
        if m is None or m.group(2) in read:
            continue
        close = difflib.get_close_matches(m.group(2), read, n=1, cutoff=0.5)
        named = nouse_uuid_annotation if m.group(1) else use_uuid_annotation
        meant = f"; did you mean {named(close[0])}?" if close else ""
        asks = f"asks for {', '.join(read)}" if read else "asks for no Ascend card"
        out.append(Violation(f"{where}[{key}]", value, f"is read by no request of the pod (it {asks}): "
                             f"the pin is ignored{meant}", warning=True))  # fmt: skip
    return out


def unread_index_pins(annotations: Mapping[str, str], where: str) -> list[Violation]:
    """A warning for each NVIDIA card-index pin (`NVIDIA_INDEX_PINS`): the pod is placed as if
    it were not there, as HAMi places it, and a user who keeps pods off a known-bad card by
    its index would otherwise find one there without a word."""
    out = []
    for key, uuid_key in NVIDIA_INDEX_PINS.items():
        if key in annotations:
            out.append(Violation(f"{where}[{key}]", annotations[key], "is not acted on: HAMi's examples "
                                 "show it, but HAMi's scheduler does not read it (the change adding it, "
                                 "Project-HAMi/HAMi #1313, is not merged) and Tessera does not either, so "
                                 "the pod may be given any card; to pin cards, list their UUIDs in "
                                 f"{uuid_key} (`tessera get cards` names them)", warning=True))  # fmt: skip
    return out
