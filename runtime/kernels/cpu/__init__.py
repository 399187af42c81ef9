"""fuel's CPU kernel library: numpy kernels for every fuel op, registered in the binding table.

Every kernel is destination-passing (`kernel(inputs, outputs, params)` writes `outputs[0]` in
place), accepts strided and broadcast (stride-0) views, and is registered under the `"cpu"`
backend with `kernel_source="numpy"`, a verified `PrecisionGuarantee` and a cost function.
Families: `elementwise` (unary, binary, compare, where), `cast`, `reduction` (reduce_sum/mean/
max/min, softmax), `linalg` (matmul), `nn` (rms_norm, layer_norm, rope, attention), `movement`
(reshape, transpose, slice, concat, gather) and `fused` (matmul_bias_act, gated_mlp; hand-
registered, no contract yet). `special` holds the vectorised math numpy lacks. `torch_blas`
(kernel_source `torch-blas`, only where torch is installed) puts matmul and the f32 fused
matmuls on PyTorch's CPU BLAS, registered before the numpy kernel at each of its keys.
`native` (kernel_source `native`, only where a C compiler exists) puts f32 decode GEMVs,
gated_mlp and rms_norm on fuel's own C library (`runtime.native`), after numpy. `library`
registers them all (`register_cpu_kernels`, `hand_registered_table`); `activations` holds what
the fused kernels apply to their products.
"""
