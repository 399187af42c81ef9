// RUN: fuel-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// CHECK: 'fuel.reshape' cannot reshape 4x8 (32 elements) to 5x6 (30 elements)
func.func @reshape_count(%x: tensor<4x8xf32>) {
  %0 = "fuel.reshape"(%x) : (tensor<4x8xf32>) -> tensor<5x6xf32>
  func.return
}

// -----
// CHECK: 'fuel.reshape' expects one element type for all operands, got f32, i32
func.func @reshape_bitcast(%x: tensor<4x8xf32>) {
  %0 = "fuel.reshape"(%x) : (tensor<4x8xf32>) -> tensor<32xi32>
  func.return
}

// -----
// CHECK: 'fuel.transpose' perm [0, 0] is not a permutation of 0..1
func.func @transpose_perm(%x: tensor<4x8xf32>) {
  %0 = "fuel.transpose"(%x) <{perm = array<i64: 0, 0>}> : (tensor<4x8xf32>) -> tensor<4x4xf32>
  func.return
}

// -----
// CHECK: 'fuel.transpose' result must have shape 8x4, got 4x8
func.func @transpose_result(%x: tensor<4x8xf32>) {
  %0 = "fuel.transpose"(%x) <{perm = array<i64: 1, 0>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.slice' starts, limits and steps need one entry per dim (2)
func.func @slice_arity(%x: tensor<4x8xf32>) {
  %0 = "fuel.slice"(%x) <{starts = array<i64: 0>, limits = array<i64: 4>, steps = array<i64: 1>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.slice' steps must be >= 1, got [1, -1]
func.func @slice_negative_step(%x: tensor<4x8xf32>) {
  %0 = "fuel.slice"(%x) <{starts = array<i64: 0, 7>, limits = array<i64: 4, 0>, steps = array<i64: 1, -1>}> : (tensor<4x8xf32>) -> tensor<4x7xf32>
  func.return
}

// -----
// CHECK: 'fuel.slice' result must have shape 2x4, got 2x3
func.func @slice_result(%x: tensor<4x8xf32>) {
  %0 = "fuel.slice"(%x) <{starts = array<i64: -2, 1>, limits = array<i64: 4, 8>, steps = array<i64: 1, 2>}> : (tensor<4x8xf32>) -> tensor<2x3xf32>
  func.return
}

// -----
// CHECK: 'fuel.concat' needs at least one input
func.func @concat_empty() {
  %0 = "fuel.concat"() <{axis = 0 : i64}> : () -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.concat' input shapes 2x8 and 2x4 differ outside axis 0
func.func @concat_mismatch(%a: tensor<2x8xf32>, %b: tensor<2x4xf32>) {
  %0 = "fuel.concat"(%a, %b) <{axis = 0 : i64}> : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.concat' axis 2 is out of range for rank 2
func.func @concat_axis(%a: tensor<2x8xf32>) {
  %0 = "fuel.concat"(%a, %a) <{axis = 2 : i64}> : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8x2xf32>
  func.return
}

// -----
// CHECK: 'fuel.concat' result must have shape 2x16, got 4x8
func.func @concat_result(%a: tensor<2x8xf32>) {
  %0 = "fuel.concat"(%a, %a) <{axis = -1 : i64}> : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.gather' indices must be i64 or i32, got f32
func.func @gather_float_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  %0 = "fuel.gather"(%t, %i) <{axis = 0 : i64}> : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  func.return
}

// -----
// CHECK: 'fuel.gather' axis -3 is out of range for rank 2
func.func @gather_axis(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  %0 = "fuel.gather"(%t, %i) <{axis = -3 : i64}> : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  func.return
}

// -----
// CHECK: 'fuel.gather' result must have shape 2x5x4, got 10x4
func.func @gather_result(%t: tensor<10x4xf32>, %i: tensor<2x5xi32>) {
  %0 = "fuel.gather"(%t, %i) <{axis = 0 : i64}> : (tensor<10x4xf32>, tensor<2x5xi32>) -> tensor<10x4xf32>
  func.return
}

// -----
// CHECK: 'fuel.index_copy' index must be i64 or i32, got f32
func.func @index_copy_index_float(%c: tensor<4x8xf32>, %k: tensor<4x1xf32>, %p: tensor<1xf32>) {
  %0 = "fuel.index_copy"(%c, %k, %p) <{axis = 1 : i64, offsets = array<i64: 0, 0>}> : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<1xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.index_copy' index must be 1-D, got 1x1
func.func @index_copy_index_rank(%c: tensor<4x8xf32>, %k: tensor<4x1xf32>, %p: tensor<1x1xi64>) {
  %0 = "fuel.index_copy"(%c, %k, %p) <{axis = 1 : i64, offsets = array<i64: 0, 0>}> : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<1x1xi64>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.index_copy' source rank 1 differs from dest rank 2
func.func @index_copy_source_rank(%c: tensor<4x8xf32>, %k: tensor<1xf32>, %p: tensor<1xi64>) {
  %0 = "fuel.index_copy"(%c, %k, %p) <{axis = 1 : i64, offsets = array<i64: 0, 0>}> : (tensor<4x8xf32>, tensor<1xf32>, tensor<1xi64>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.index_copy' offsets must be 2 entries >= 0 with offsets[1] = 0, got [0, 3]
func.func @index_copy_offsets_axis(%c: tensor<4x8xf32>, %k: tensor<4x1xf32>, %p: tensor<1xi64>) {
  %0 = "fuel.index_copy"(%c, %k, %p) <{axis = 1 : i64, offsets = array<i64: 0, 3>}> : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.index_copy' source has 2 rows along axis 1, index 1
func.func @index_copy_rows(%c: tensor<4x8xf32>, %k: tensor<4x2xf32>, %p: tensor<1xi64>) {
  %0 = "fuel.index_copy"(%c, %k, %p) <{axis = 1 : i64, offsets = array<i64: 0, 0>}> : (tensor<4x8xf32>, tensor<4x2xf32>, tensor<1xi64>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.index_copy' source block 2x1 at offsets [3, 0] does not fit dest 4x8 (dim 0)
func.func @index_copy_block(%c: tensor<4x8xf32>, %k: tensor<2x1xf32>, %p: tensor<1xi64>) {
  %0 = "fuel.index_copy"(%c, %k, %p) <{axis = 1 : i64, offsets = array<i64: 3, 0>}> : (tensor<4x8xf32>, tensor<2x1xf32>, tensor<1xi64>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.constant' value type tensor<2xf32> differs from result tensor<2xf16>
func.func @constant_type() {
  %0 = "fuel.constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf16>
  func.return
}

// -----
// CHECK: 'fuel.constant' unsupported element type i16
func.func @constant_int16() {
  %0 = "fuel.constant"() <{value = dense<1> : tensor<2xi16>}> : () -> tensor<2xi16>
  func.return
}

// -----
// CHECK: expected a dense<...> : tensor<...> value
func.func @constant_scalar() {
  %0 = fuel.constant 1.0 : f32
  func.return
}

// -----
// CHECK: 'fuel.weight' needs a non-empty name
func.func @weight_unnamed() {
  %0 = "fuel.weight"() <{sym_name = ""}> : () -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.weight' expects static shapes, got tensor<?x4xf32> (dynamic dimensions are unsupported)
func.func @weight_dynamic() {
  %0 = "fuel.weight"() <{sym_name = "w"}> : () -> tensor<?x4xf32>
  func.return
}

// -----
// CHECK: 'fuel.broadcast' cannot broadcast 3x8 to 4x8 (each input dim, aligned right, must be 1 or the result dim)
func.func @broadcast_dims(%x: tensor<3x8xf32>) {
  %0 = "fuel.broadcast"(%x) : (tensor<3x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----
// CHECK: 'fuel.broadcast' cannot broadcast 2x8 to 8 (each input dim, aligned right, must be 1 or the result dim)
func.func @broadcast_rank(%x: tensor<2x8xf32>) {
  %0 = "fuel.broadcast"(%x) : (tensor<2x8xf32>) -> tensor<8xf32>
  func.return
}

// -----
// CHECK: 'fuel.broadcast' expects one element type for all operands, got f32, f16
func.func @broadcast_dtype(%x: tensor<8xf32>) {
  %0 = "fuel.broadcast"(%x) : (tensor<8xf32>) -> tensor<4x8xf16>
  func.return
}
