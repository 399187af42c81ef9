"""IR -> kernel calls, generated source and the bundle: the backend interface (`backend`),
shared fusion groups, the CPU (`cpu/`) and Triton (`triton/`) backends, each with its
`convert-fuel-to-<target>` pass, and the bundle writer (`bundle`)."""

LOWERING_PASSES = {
    "convert-fuel-to-triton": ("lowering.triton.convert_fuel_to_triton", "ConvertFuelToTritonPass"),
    "convert-fuel-to-c": ("lowering.cpu.convert_fuel_to_c", "ConvertFuelToCPass"),
}
"""pass name -> (module, class) of each backend's conversion pass; imported on first use."""
