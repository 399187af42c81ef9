"""Fused ops: `registry` (each fused op's kernels and precision), `patterns` and `attention`
(the IR matchers and builders `fuel-fuse-patterns` and the CPU backend use), `symbolic`
(how they compare shapes: a `?` dim equals another only where their dim symbols say so)."""
