"""The scheduler service: Volcano sessions over a projection of the whole log."""
