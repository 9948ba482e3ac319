"""Scheduler plugins, one module each; `services.core.scheduling.registry` wires them."""
