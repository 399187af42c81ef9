"""Ways into fuel IR: the Python `GraphBuilder`, the ONNX importer (`frontends.onnx`) and the
torch.export importer (`frontends.torch_export`). Imports runtime and fuel_dialect only."""
