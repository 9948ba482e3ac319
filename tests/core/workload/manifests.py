"""Manifests the admission tests share."""

from __future__ import annotations


def one_task_job(template_spec: str, replicas: int = 1) -> str:
    """A Volcano Job `j` of one task `w` whose pod template's spec is `template_spec` (YAML
    lines indented for it, e.g. `        containers: [...]`)."""
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: j}}
spec:
  minAvailable: 1
  tasks:
  - name: w
    replicas: {replicas}
    template:
      spec:
{template_spec}
"""
