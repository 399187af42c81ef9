"""Ways into fuel IR: the Python GraphBuilder (ONNX and torch.export importers later)."""
