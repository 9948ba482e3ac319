"""What the log says of the cluster's storage: PersistentVolumeClaims, PersistentVolumes and
StorageClasses, each as its last `ClaimChanged` / `VolumeChanged` / `StorageClassChanged`
(or gone after `StorageDeleted`).

Sessions read it through `Storage` (volumes.py decides with it). A cluster without storage
objects, or pods without claims, cost nothing here: the frozen view is rebuilt only after a
storage event, never per session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from contracts.base import Event
from contracts.events import ClaimChanged, StorageClassChanged, StorageDeleted, VolumeChanged

CLAIM, VOLUME, CLASS = "pvc", "pv", "sc"
#: the claim annotation kube-scheduler writes for a WaitForFirstConsumer claim (and reads back)
SELECTED_NODE = "volume.kubernetes.io/selected-node"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
#: the PersistentVolume labels kube-scheduler's VolumeZone reads (beta first, as it lists them)
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)


def claim_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class Storage:
    """The frozen view a session reads (read-only mappings over copies)."""

    claims: MappingProxyType[str, ClaimChanged] = field(
        default_factory=lambda: MappingProxyType({})
    )
    volumes: MappingProxyType[str, VolumeChanged] = field(
        default_factory=lambda: MappingProxyType({})
    )
    classes: MappingProxyType[str, StorageClassChanged] = field(
        default_factory=lambda: MappingProxyType({})
    )


NO_STORAGE = Storage()


class StorageState:
    """The mutable fold (a part of `ClusterProjection`); `frozen()` is cached until it changes."""

    __slots__ = ("_frozen", "claims", "classes", "volumes")

    def __init__(
        self,
        claims: dict[str, ClaimChanged] | None = None,
        volumes: dict[str, VolumeChanged] | None = None,
        classes: dict[str, StorageClassChanged] | None = None,
    ) -> None:
        self.claims = claims if claims is not None else {}
        self.volumes = volumes if volumes is not None else {}
        self.classes = classes if classes is not None else {}
        self._frozen: Storage | None = None

    def apply(self, event: Event) -> None:
        match event:
            case ClaimChanged():
                self.claims[claim_key(event.namespace, event.name)] = event
            case VolumeChanged():
                self.volumes[event.name] = event
            case StorageClassChanged():
                self.classes[event.name] = event
            case StorageDeleted(kind=kind):
                if kind == CLAIM:
                    self.claims.pop(claim_key(event.namespace, event.name), None)
                elif kind == VOLUME:
                    self.volumes.pop(event.name, None)
                elif kind == CLASS:
                    self.classes.pop(event.name, None)
            case _:
                return
        self._frozen = None

    def frozen(self) -> Storage:
        if self._frozen is None:
            if not (self.claims or self.volumes or self.classes):
                self._frozen = NO_STORAGE
            else:
                self._frozen = Storage(MappingProxyType(dict(self.claims)),
                                       MappingProxyType(dict(self.volumes)),
                                       MappingProxyType(dict(self.classes)))  # fmt: skip
        return self._frozen
