"""`tessera simulate`: the pure cores driven in-process over an in-memory log and a virtual clock."""
