"""Ways into fuel IR: the Python `GraphBuilder`, the ONNX importer (`frontends.onnx`) and the
torch.export importer (`frontends.torch_export`), which share the constant-folding `Emitter`
(`frontends.emit`) and the KV-mask matcher (`frontends.kv_mask`). Imports runtime and
fuel_dialect only."""
