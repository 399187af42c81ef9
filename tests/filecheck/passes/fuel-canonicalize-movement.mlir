// RUN: fuel-opt %s -p fuel-canonicalize | filecheck %s
// RUN: fuel-opt %s -p fuel-canonicalize | fuel-opt -p fuel-canonicalize | filecheck %s

// Two transposes compose into one; a pair that cancels goes.
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:    %[[T:.*]] = fuel.transpose %[[X]] perm = [2, 1, 0] : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
// CHECK-NEXT:    func.return %[[T]], %[[X]]
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> (tensor<4x3x2xf32>, tensor<2x3x4xf32>) {
  %a = fuel.transpose %x perm = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %b = fuel.transpose %a perm = [1, 2, 0] : tensor<2x4x3xf32> -> tensor<4x3x2xf32>
  %c = fuel.transpose %x perm = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %d = fuel.transpose %c perm = [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  func.return %b, %d : tensor<4x3x2xf32>, tensor<2x3x4xf32>
}

// Two reshapes are one; a reshape back to the input's shape goes.
// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME:    (%[[X:.*]]: tensor<12x64xf32>)
// CHECK-NEXT:    %[[R:.*]] = fuel.reshape %[[X]] : tensor<12x64xf32> -> tensor<3x4x64xf32>
// CHECK-NEXT:    func.return %[[R]], %[[X]]
func.func @reshape_of_reshape(%x: tensor<12x64xf32>) -> (tensor<3x4x64xf32>, tensor<12x64xf32>) {
  %a = fuel.reshape %x : tensor<12x64xf32> -> tensor<1x12x64xf32>
  %b = fuel.reshape %a : tensor<1x12x64xf32> -> tensor<3x4x64xf32>
  %c = fuel.reshape %x : tensor<12x64xf32> -> tensor<1x12x64xf32>
  %d = fuel.reshape %c : tensor<1x12x64xf32> -> tensor<12x64xf32>
  func.return %b, %d : tensor<3x4x64xf32>, tensor<12x64xf32>
}

// A transpose between reshapes, or a reshape between transposes, stays: they do not compose.
// CHECK-LABEL: func.func @movement_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<2x6xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.reshape %[[X]] : tensor<2x6xf32> -> tensor<2x2x3xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.transpose %[[A]] perm = [0, 2, 1]
// CHECK-NEXT:    %[[C:.*]] = fuel.reshape %[[B]] : tensor<2x3x2xf32> -> tensor<2x6xf32>
// CHECK-NEXT:    %[[D:.*]] = fuel.transpose %[[C]] perm = [1, 0]
// CHECK-NEXT:    func.return %[[D]]
func.func @movement_not_applied(%x: tensor<2x6xf32>) -> tensor<6x2xf32> {
  %a = fuel.reshape %x : tensor<2x6xf32> -> tensor<2x2x3xf32>
  %b = fuel.transpose %a perm = [0, 2, 1] : tensor<2x2x3xf32> -> tensor<2x3x2xf32>
  %c = fuel.reshape %b : tensor<2x3x2xf32> -> tensor<2x6xf32>
  %d = fuel.transpose %c perm = [1, 0] : tensor<2x6xf32> -> tensor<6x2xf32>
  func.return %d : tensor<6x2xf32>
}

// At a symbolic seq the shapes are compared as expressions: (1, seq, 64) -> (1, 2*seq, 32) ->
// (1, seq, 64) is the input's own shape, so both reshapes go.
// CHECK-LABEL: func.func @reshape_of_reshape_symbolic
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<1x?x64xf32>
// CHECK-NEXT:    func.return %[[X]]
func.func @reshape_of_reshape_symbolic(%x: tensor<1x?x64xf32> {fuel.dim_names = ["seq"]}) -> tensor<1x?x64xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 256>}} {
  %a = fuel.reshape %x : tensor<1x?x64xf32> -> tensor<1x?x32xf32>
  %b = fuel.reshape %a : tensor<1x?x32xf32> -> tensor<1x?x64xf32>
  func.return %b : tensor<1x?x64xf32>
}

// A reshape that writes its dims in the symbols keeps them when it absorbs the reshape under
// it: (batch, seq, 4) -> (batch*seq, 4) -> (batch, seq, 2, 2) is one reshape of the input.
// CHECK-LABEL: func.func @reshape_of_reshape_written_dims
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<?x?x4xf32>
// CHECK-NEXT:    %[[R:.*]] = fuel.reshape %[[X]] {dims = ["batch", "seq", 2 : i64, 2 : i64]} : tensor<?x?x4xf32> -> tensor<?x?x2x2xf32>
// CHECK-NEXT:    func.return %[[R]]
func.func @reshape_of_reshape_written_dims(%x: tensor<?x?x4xf32> {fuel.dim_names = ["batch", "seq"]}) -> tensor<?x?x2x2xf32> attributes {fuel.dims = {batch = #fuel.dim<1, 8>, seq = #fuel.dim<1, 64>}} {
  %a = fuel.reshape %x : tensor<?x?x4xf32> -> tensor<?x4xf32>
  %b = fuel.reshape %a {dims = ["batch", "seq", 2, 2]} : tensor<?x4xf32> -> tensor<?x?x2x2xf32>
  func.return %b : tensor<?x?x2x2xf32>
}
