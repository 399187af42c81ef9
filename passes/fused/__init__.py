"""Fused ops: `registry` (each fused op's kernels and precision), `patterns` and `attention`
(the IR matchers and builders `fuel-fuse-patterns` and the CPU backend use)."""
