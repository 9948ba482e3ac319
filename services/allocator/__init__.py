"""The allocator: owns the per-card slice ledgers and commits gang placements atomically."""
