"""The queue service: queue, PodGroup and job lifecycles, node liveness, vcctl-style commands."""
