"""A Llama-style decoder in PyTorch (random weights, fixed seed), exported to fuel."""
