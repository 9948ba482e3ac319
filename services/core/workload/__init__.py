"""Workload model: Kubernetes/Volcano manifests → normalized records (admission rules applied)."""

from services.core.workload.admission import PriorityClass, RunningPod, Workload, admit
from services.core.workload.manifests import ManifestError, load_documents
from services.core.workload.rejection import Rejection

__all__ = [
    "ManifestError",
    "PriorityClass",
    "Rejection",
    "RunningPod",
    "Workload",
    "admit",
    "load_documents",
]
