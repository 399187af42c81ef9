// RUN: fuel-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: 'fuel.matmul_bias_act' act must be one of none, relu, gelu, gelu_tanh, silu, got 'tanh'
func.func @act_unknown(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) {
  %0 = "fuel.matmul_bias_act"(%x, %w, %b) <{act = "tanh"}> : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return
}

// -----
// CHECK: 'fuel.matmul_bias_act' input must have rank >= 2, got 8
func.func @act_vector(%x: tensor<8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) {
  %0 = "fuel.matmul_bias_act"(%x, %w, %b) <{act = "relu"}> : (tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<16xf32>
  func.return
}

// -----
// CHECK: 'fuel.matmul_bias_act' weight must be a (8, n) matrix, got 4x16
func.func @act_k_mismatch(%x: tensor<4x8xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) {
  %0 = "fuel.matmul_bias_act"(%x, %w, %b) <{act = "relu"}> : (tensor<4x8xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return
}

// -----
// CHECK: 'fuel.matmul_bias_act' bias must have shape 16, got 4x16
func.func @act_bias_shape(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<4x16xf32>) {
  %0 = "fuel.matmul_bias_act"(%x, %w, %b) <{act = "relu"}> : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return
}

// -----
// CHECK: 'fuel.gated_mlp' down weight must be a (16, n) matrix, got 8x8
func.func @gated_down_mismatch(%x: tensor<4x8xf32>, %g: tensor<8x16xf32>, %u: tensor<8x16xf32>, %d: tensor<8x8xf32>) {
  %0 = "fuel.gated_mlp"(%x, %g, %u, %d) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.gated_mlp' up weight must have shape 8x16, got 8x12
func.func @gated_up_mismatch(%x: tensor<4x8xf32>, %g: tensor<8x16xf32>, %u: tensor<8x12xf32>, %d: tensor<16x8xf32>) {
  %0 = "fuel.gated_mlp"(%x, %g, %u, %d) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<8x12xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  func.return
}
