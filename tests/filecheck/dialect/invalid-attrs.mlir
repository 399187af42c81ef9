// RUN: fuel-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// CHECK: invalid device 'gpu' (expected "cpu" or "<backend>:<n>")
func.func @device_no_ordinal(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {fuel.device = #fuel.device<"gpu">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: invalid device 'cuda:0:1' (expected "cpu" or "<backend>:<n>")
func.func @device_two_ordinals(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {fuel.device = #fuel.device<"cuda:0:1">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: invalid backend name 'CUDA' (expected e.g. "cpu")
func.func @backend_upper_case(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {b = #fuel.backend<"CUDA">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: string literal expected
func.func @backend_unquoted(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {b = #fuel.backend<cuda>} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: invalid #fuel.kernel: revision 'xyz' is not hex
func.func @kernel_revision(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {fuel.kernel = #fuel.kernel<"neg", [f32, f32], "cpu", "numpy", "xyz">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: invalid #fuel.kernel: invalid backend name 'Triton!'
func.func @kernel_backend(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {fuel.kernel = #fuel.kernel<"neg", [f32, f32], "Triton!", "triton", "1f">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: invalid #fuel.kernel: unsupported element type i16
func.func @kernel_dtype(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {fuel.kernel = #fuel.kernel<"neg", [i16, i16], "cpu", "numpy", "1f">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: #fuel.kernel takes 5 parameters (op, dtypes, backend, kernel_source, revision), got 4
func.func @kernel_arity(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {fuel.kernel = #fuel.kernel<"neg", [f32, f32], "cpu", "1f">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: unknown precision claim 'ulps'
func.func @precision_claim(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {p = #fuel.precision<ulps = 1>} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: invalid #fuel.precision: rel must be >= 0, got -0.5
func.func @precision_negative(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {p = #fuel.precision<rel = -0.5>} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: invalid #fuel.precision: an unaudited guarantee makes no claims
func.func @precision_unaudited_claim(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {p = #fuel.precision<unaudited, bit_stable>} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.bogus' is not registered
func.func @unknown_attribute(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {b = #fuel.bogus<"x">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
