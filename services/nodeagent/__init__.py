"""The node-agent: registers nodes, runs committed tasks (simulated), reports their outcomes."""
