"""Admission: validates submitted manifests with the simulate rules and appends what it accepts."""
