"""The kubelet's device-plugin API v1beta1: `deviceplugin.proto` and the stubs grpcio-tools
1.85 generated from it (checked in: a fresh `make .venv/.installed` needs no code generator;
the command is at the top of the .proto). Ruff skips the generated files (pyproject.toml)."""
