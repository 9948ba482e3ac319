"""The pure device layer: catalogue, request parsing, per-card fit, scores, policies (HAMi rules)."""
