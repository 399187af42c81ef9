// RUN: fuel-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: 'fuel.matmul' operands must have rank >= 2, got 8 and 8x4
func.func @matmul_vector(%x: tensor<8xf32>, %w: tensor<8x4xf32>) {
  %0 = "fuel.matmul"(%x, %w) : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.matmul' contraction dims differ: lhs 4x8 has k=8, rhs 4x16 has k=4
func.func @matmul_k_mismatch(%x: tensor<4x8xf32>, %w: tensor<4x16xf32>) {
  %0 = "fuel.matmul"(%x, %w) : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return
}

// -----
// CHECK: 'fuel.matmul' batch dims do not broadcast: 2x3 vs 4
func.func @matmul_batch_mismatch(%x: tensor<2x3x4x8xf32>, %w: tensor<4x8x16xf32>) {
  %0 = "fuel.matmul"(%x, %w) : (tensor<2x3x4x8xf32>, tensor<4x8x16xf32>) -> tensor<2x3x4x16xf32>
  func.return
}

// -----
// CHECK: 'fuel.matmul' result must have shape 2x4x16, got 4x16
func.func @matmul_drops_batch(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>) {
  %0 = "fuel.matmul"(%x, %w) : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return
}

// -----
// CHECK: 'fuel.matmul' expects one element type for all operands, got f16, f16, f32
func.func @matmul_widening(%x: tensor<4x4xf16>) {
  %0 = "fuel.matmul"(%x, %x) : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf32>
  func.return
}

// -----
// CHECK: 'fuel.reduce_sum' axis 2 is out of range for rank 2
func.func @reduce_axis_range(%x: tensor<4x8xf32>) {
  %0 = "fuel.reduce_sum"(%x) <{axes = array<i64: 2>}> : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.reduce_max' axes [-1, 1] repeat a dimension
func.func @reduce_repeated_axis(%x: tensor<4x8xf32>) {
  %0 = "fuel.reduce_max"(%x) <{axes = array<i64: -1, 1>}> : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.reduce_min' result must have shape 4x1, got 4
func.func @reduce_keepdim_shape(%x: tensor<4x8xi32>) {
  %0 = "fuel.reduce_min"(%x) <{axes = array<i64: 1>, keepdim}> : (tensor<4x8xi32>) -> tensor<4xi32>
  func.return
}

// -----
// CHECK: 'fuel.reduce_mean' expects a float element type for operand, got i32
func.func @reduce_mean_int(%x: tensor<4x8xi32>) {
  %0 = "fuel.reduce_mean"(%x) <{axes = array<i64: 1>}> : (tensor<4x8xi32>) -> tensor<4xi32>
  func.return
}

// -----
// CHECK: 'fuel.softmax' axis -3 is out of range for rank 2
func.func @softmax_axis_range(%x: tensor<4x8xf32>) {
  %0 = "fuel.softmax"(%x) <{axis = -3 : i64}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.softmax' result must have shape 4x8, got 8x4
func.func @softmax_result_shape(%x: tensor<4x8xf32>) {
  %0 = "fuel.softmax"(%x) <{axis = -1 : i64}> : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return
}

// -----
// CHECK: 'fuel.rms_norm' input must have rank >= 1
func.func @norm_scalar(%x: tensor<f32>, %w: tensor<1xf32>) {
  %0 = "fuel.rms_norm"(%x, %w) <{eps = 1.0e-06 : f64}> : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  func.return
}

// -----
// CHECK: 'fuel.layer_norm' scale/bias must have shape 8, got 4
func.func @norm_bias_shape(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<4xf32>) {
  %0 = "fuel.layer_norm"(%x, %w, %b) <{eps = 1.0e-05 : f64}> : (tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.rms_norm' eps must be positive, got 0.0
func.func @norm_eps_zero(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  %0 = "fuel.rms_norm"(%x, %w) <{eps = 0.0 : f64}> : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.rope' input must be (..., S, D) with D even, got 6x7
func.func @rope_odd_dim(%x: tensor<6x7xf32>, %t: tensor<6x3xf32>) {
  %0 = "fuel.rope"(%x, %t, %t) : (tensor<6x7xf32>, tensor<6x3xf32>, tensor<6x3xf32>) -> tensor<6x7xf32>
  func.return
}

// -----
// CHECK: 'fuel.rope' cos must have shape 6x4, got 6x8
func.func @rope_full_width_table(%x: tensor<6x8xf32>, %c: tensor<6x8xf32>, %s: tensor<6x4xf32>) {
  %0 = "fuel.rope"(%x, %c, %s) : (tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x4xf32>) -> tensor<6x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.rope' sin must have shape 6x4, got 5x4
func.func @rope_sin_seq(%x: tensor<6x8xf32>, %c: tensor<6x4xf32>, %s: tensor<5x4xf32>) {
  %0 = "fuel.rope"(%x, %c, %s) <{interleaved}> : (tensor<6x8xf32>, tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x8xf32>
  func.return
}
