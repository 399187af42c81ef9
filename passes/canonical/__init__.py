"""The rewrites of `fuel-canonicalize`, by family: `powers`, `activations`, `movement`,
`reductions`, `identities`."""
