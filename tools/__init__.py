"""fuel's entry points: `fuel` (`tools.fuel`), `fuel-opt` (`tools.fuel_opt`) and their
subcommands (`kernels`, `judge`, `import_onnx`, `explain`), and the ONNX conformance runner.
Tools import anything; nothing imports tools."""
