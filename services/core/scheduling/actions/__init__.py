"""Session actions, one module each; `services.core.scheduling.registry` wires them."""
