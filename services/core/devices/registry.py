"""Vendor registry, built by a function (STYLE §3: no import-time registration).

Adding a vendor is one module implementing ``DeviceVendor`` and one line in
:func:`build_vendors`.
"""

from __future__ import annotations

from collections.abc import Iterator

from services.core.devices.ascend import AscendVendor
from services.core.devices.catalogue import Catalogue, default_catalogue
from services.core.devices.nvidia import NvidiaVendor
from services.core.devices.vendor import DeviceVendor


class VendorRegistry:
    """Vendors by name, and by every resource name they read; duplicates are refused."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue
        self._vendors: dict[str, DeviceVendor] = {}
        self._by_resource: dict[str, DeviceVendor] = {}

    def register(self, vendor: DeviceVendor) -> None:
        if vendor.name in self._vendors:
            raise ValueError(f"vendor {vendor.name!r} is already registered")
        for resource in vendor.resource_names():
            other = self._by_resource.get(resource)
            if other is not None:
                raise ValueError(
                    f"resource {resource!r} is claimed by {other.name!r} and {vendor.name!r}"
                )
        self._vendors[vendor.name] = vendor
        for resource in vendor.resource_names():
            self._by_resource[resource] = vendor

    def vendor(self, name: str) -> DeviceVendor:
        try:
            return self._vendors[name]
        except KeyError:
            raise KeyError(
                f"no device vendor {name!r}; known: {', '.join(sorted(self._vendors))}"
            ) from None

    def get(self, name: str) -> DeviceVendor | None:
        return self._vendors.get(name)

    def owner(self, resource: str) -> DeviceVendor | None:
        return self._by_resource.get(resource)

    def resource_names(self) -> frozenset[str]:
        return frozenset(self._by_resource)

    def __iter__(self) -> Iterator[DeviceVendor]:
        return iter(self._vendors.values())


def build_vendors(catalogue: Catalogue | None = None) -> VendorRegistry:
    """The vendors Tessera knows, configured from ``catalogue`` (HAMi defaults when None)."""
    cat = catalogue or default_catalogue()
    registry = VendorRegistry(cat)
    registry.register(NvidiaVendor(cat.nvidia))
    registry.register(AscendVendor(cat))
    return registry
