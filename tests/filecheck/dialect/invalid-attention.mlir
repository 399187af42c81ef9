// RUN: fuel-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: 'fuel.attention' q, k and v must have rank 4 (batch, heads, seq, head_dim)
func.func @attention_rank3(%x: tensor<4x16x32xf32>) {
  %0 = "fuel.attention"(%x, %x, %x) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  func.return
}

// -----
// CHECK: 'fuel.attention' k 1x2x16x32 and v 1x2x12x32 must share batch, heads and seq, and batch must match q 1x4x16x32
func.func @attention_kv_seq(%q: tensor<1x4x16x32xf32>, %k: tensor<1x2x16x32xf32>, %v: tensor<1x2x12x32xf32>) {
  %0 = "fuel.attention"(%q, %k, %v) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x12x32xf32>) -> tensor<1x4x16x32xf32>
  func.return
}

// -----
// CHECK: 'fuel.attention' q head_dim 64 differs from k head_dim 32
func.func @attention_head_dim(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x32xf32>) {
  %0 = "fuel.attention"(%q, %k, %k) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<1x4x16x64xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>) -> tensor<1x4x16x32xf32>
  func.return
}

// -----
// CHECK: 'fuel.attention' query heads (6) must be a multiple of kv heads (4)
func.func @attention_gqa_groups(%q: tensor<1x6x16x32xf32>, %k: tensor<1x4x16x32xf32>) {
  %0 = "fuel.attention"(%q, %k, %k) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<1x6x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>) -> tensor<1x6x16x32xf32>
  func.return
}

// -----
// CHECK: 'fuel.attention' result must have shape 1x8x1x64, got 1x2x1x64
func.func @attention_result_heads(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x128x64xf32>) {
  %0 = "fuel.attention"(%q, %k, %k) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<1x8x1x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32>) -> tensor<1x2x1x64xf32>
  func.return
}

// -----
// CHECK: 'fuel.attention' kv_len must be tensor<i64>, got tensor<1xi64>
func.func @attention_kv_len_rank(%q: tensor<1x2x1x8xf32>, %n: tensor<1xi64>) {
  %0 = "fuel.attention"(%q, %q, %q, %n) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}> : (tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32>, tensor<1xi64>) -> tensor<1x2x1x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.attention' kv_len must be tensor<i64>, got tensor<i32>
func.func @attention_kv_len_i32(%q: tensor<1x2x1x8xf32>, %n: tensor<i32>) {
  %0 = "fuel.attention"(%q, %q, %q, %n) <{causal, scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}> : (tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32>, tensor<i32>) -> tensor<1x2x1x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.attention' expects a float element type for operand, got i8
func.func @attention_int(%q: tensor<1x2x1x8xi8>) {
  %0 = "fuel.attention"(%q, %q, %q) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<1x2x1x8xi8>, tensor<1x2x1x8xi8>, tensor<1x2x1x8xi8>) -> tensor<1x2x1x8xi8>
  func.return
}

// -----
// CHECK: 'fuel.attention' mask 1x2x4x6 does not broadcast to 1x8x4x6
func.func @attention_mask_heads(%q: tensor<1x8x4x16xf32>, %k: tensor<1x2x6x16xf32>, %m: tensor<1x2x4x6xf32>) {
  %0 = "fuel.attention"(%q, %k, %k, %m) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>}> : (tensor<1x8x4x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x4x6xf32>) -> tensor<1x8x4x16xf32>
  func.return
}

// -----
// CHECK: 'fuel.attention' mask and kv_len are exclusive
func.func @attention_mask_kv_len(%q: tensor<1x2x1x8xf32>, %n: tensor<i64>, %m: tensor<1x1x1x1xf32>) {
  %0 = "fuel.attention"(%q, %q, %q, %n, %m) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}> : (tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32>, tensor<i64>, tensor<1x1x1x1xf32>) -> tensor<1x2x1x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.attention' expects one element type for all operands, got f32, i1
func.func @attention_mask_int(%q: tensor<1x2x4x8xf32>, %m: tensor<4x4xi1>) {
  %0 = "fuel.attention"(%q, %q, %q, %m) <{scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>}> : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x4xi1>) -> tensor<1x2x4x8xf32>
  func.return
}
