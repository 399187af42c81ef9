// RUN: fuel-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: 'fuel.exp' expects a float element type for operand, got i32
func.func @unary_float_only(%x: tensor<4xi32>) {
  %0 = "fuel.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  func.return
}

// -----
// CHECK: 'fuel.neg' does not accept i1 operands
func.func @unary_bool(%x: tensor<4xi1>) {
  %0 = "fuel.neg"(%x) : (tensor<4xi1>) -> tensor<4xi1>
  func.return
}

// -----
// CHECK: attribute tensor<4xf32> expected from variable 'T', but got tensor<4xf16>
func.func @unary_type_changes(%x: tensor<4xf32>) {
  %0 = "fuel.sigmoid"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  func.return
}

// -----
// CHECK: 'func.func' @dynamic_shape argument 0 (tensor<?x8xf32>) has 1 dynamic dim(s) but fuel.dim_names names 0
func.func @dynamic_shape(%x: tensor<?x8xf32>) {
  %0 = "fuel.relu"(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  func.return
}

// -----
// CHECK: operand 'input' at position 0 does not verify
func.func @unranked(%x: tensor<*xf32>) {
  %0 = "fuel.cast"(%x) : (tensor<*xf32>) -> tensor<4xf16>
  func.return
}

// -----
// CHECK: 'fuel.abs' unsupported element type i16
func.func @int16_unsupported(%x: tensor<4xi16>) {
  %0 = "fuel.abs"(%x) : (tensor<4xi16>) -> tensor<4xi16>
  func.return
}

// -----
// CHECK: 'fuel.cast' unsupported element type f8E4M3FN
func.func @fp8_unsupported(%x: tensor<4xf32>) {
  %0 = "fuel.cast"(%x) : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
  func.return
}

// -----
// CHECK: 'fuel.add' expects one element type for all operands, got f32, f16
func.func @binary_mixed_types(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  %0 = "fuel.add"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.div' expects a float element type for operand, got i64
func.func @div_int(%x: tensor<4xi64>) {
  %0 = "fuel.div"(%x, %x) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return
}

// -----
// CHECK: 'fuel.mul' does not accept i1 operands
func.func @mul_bool(%x: tensor<4xi1>) {
  %0 = "fuel.mul"(%x, %x) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  func.return
}

// -----
// CHECK: 'fuel.sub' result element type must be f32, got f16
func.func @binary_result_type(%x: tensor<4xf32>) {
  %0 = "fuel.sub"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf16>
  func.return
}

// -----
// CHECK: 'fuel.lt' result element type must be i1, got f32
func.func @compare_result_not_bool(%x: tensor<4xf32>) {
  %0 = "fuel.lt"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.max' operands are not broadcast-compatible: 4x8 vs 4
func.func @binary_no_broadcast(%x: tensor<4x8xf32>, %y: tensor<4xf32>) {
  %0 = "fuel.max"(%x, %y) : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.pow' result must have shape 4x8, got 8
func.func @binary_result_shape(%x: tensor<4x8xf32>, %y: tensor<8xf32>) {
  %0 = "fuel.pow"(%x, %y) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return
}

// -----
// CHECK: 'fuel.where' condition must have element type i1, got f32
func.func @where_cond_not_bool(%x: tensor<4xf32>) {
  %0 = "fuel.where"(%x, %x, %x) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.where' expects one element type for all operands, got f32, f32, bf16
func.func @where_result_type(%c: tensor<4xi1>, %x: tensor<4xf32>) {
  %0 = "fuel.where"(%c, %x, %x) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xbf16>
  func.return
}

// -----
// CHECK: 'fuel.where' operands are not broadcast-compatible: 3, 4x1, 2
func.func @where_no_broadcast(%c: tensor<3xi1>, %x: tensor<4x1xf32>, %y: tensor<2xf32>) {
  %0 = "fuel.where"(%c, %x, %y) : (tensor<3xi1>, tensor<4x1xf32>, tensor<2xf32>) -> tensor<4x3xf32>
  func.return
}

// -----
// CHECK: 'fuel.where' result must have shape 4x3, got 4x1
func.func @where_result_shape(%c: tensor<3xi1>, %x: tensor<4x1xf32>) {
  %0 = "fuel.where"(%c, %x, %x) : (tensor<3xi1>, tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  func.return
}

// -----
// CHECK: 'fuel.cast' result must have shape 2x4, got 8
func.func @cast_reshapes(%x: tensor<2x4xf32>) {
  %0 = "fuel.cast"(%x) : (tensor<2x4xf32>) -> tensor<8xf16>
  func.return
}
