// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// Dim symbols: declared with their ranges on the function, named per dynamic argument dim.

// CHECK-LABEL: func.func @mlp
// CHECK-SAME:    (%[[X:.*]]: tensor<?x8xf32> {fuel.name = "x", fuel.dim_names = ["batch"]})
// CHECK-SAME:    -> tensor<?x16xf32> attributes {fuel.dims = {batch = #fuel.dim<1, 64>}}
// CHECK-NEXT:    %[[W:.*]] = fuel.weight "w" : tensor<8x16xf32>
// CHECK-NEXT:    %[[M:.*]] = fuel.matmul %[[X]], %[[W]] : tensor<?x8xf32>, tensor<8x16xf32> -> tensor<?x16xf32>
// CHECK-NEXT:    %[[R:.*]] = fuel.relu %[[M]] : tensor<?x16xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<?x16xf32>
func.func @mlp(%x: tensor<?x8xf32> {fuel.name = "x", fuel.dim_names = ["batch"]}) -> tensor<?x16xf32> attributes {fuel.dims = {batch = #fuel.dim<1, 64>}} {
  %w = fuel.weight "w" : tensor<8x16xf32>
  %0 = fuel.matmul %x, %w : tensor<?x8xf32>, tensor<8x16xf32> -> tensor<?x16xf32>
  %1 = fuel.relu %0 : tensor<?x16xf32>
  func.return %1 : tensor<?x16xf32>
}

// Two arguments share `seq`; a static dim broadcast against `?` is static.

// CHECK-LABEL: func.func @shared_seq
// CHECK-SAME:    fuel.dim_names = ["batch", "seq"]
// CHECK-SAME:    fuel.dim_names = ["seq"]
// CHECK-SAME:    attributes {fuel.dims = {batch = #fuel.dim<1, 8>, seq = #fuel.dim<1, 2048>}}
// CHECK-NEXT:    %[[A:.*]] = fuel.add %{{.*}}, %{{.*}} : tensor<?x?x4xf32>, tensor<?x4xf32> -> tensor<?x?x4xf32>
// CHECK-NEXT:    %[[S:.*]] = fuel.slice %[[A]] starts = [0, 0, 0] limits = [1, 9223372036854775807, 4] steps = [1, 1, 1] : tensor<?x?x4xf32> -> tensor<1x?x4xf32>
// CHECK-NEXT:    %[[C:.*]] = fuel.concat %[[S]], %[[S]] axis = 1 : tensor<1x?x4xf32>, tensor<1x?x4xf32> -> tensor<1x?x4xf32>
// CHECK-NEXT:    %[[Y:.*]] = fuel.reshape %[[C]] : tensor<1x?x4xf32> -> tensor<?x2x2xf32>
func.func @shared_seq(%x: tensor<?x?x4xf32> {fuel.dim_names = ["batch", "seq"]}, %b: tensor<?x4xf32> {fuel.dim_names = ["seq"]}) -> tensor<?x2x2xf32> attributes {fuel.dims = {batch = #fuel.dim<1, 8>, seq = #fuel.dim<1, 2048>}} {
  %0 = fuel.add %x, %b : tensor<?x?x4xf32>, tensor<?x4xf32> -> tensor<?x?x4xf32>
  %1 = fuel.slice %0 starts = [0, 0, 0] limits = [1, 9223372036854775807, 4] steps = [1, 1, 1] : tensor<?x?x4xf32> -> tensor<1x?x4xf32>
  %2 = fuel.concat %1, %1 axis = 1 : tensor<1x?x4xf32>, tensor<1x?x4xf32> -> tensor<1x?x4xf32>
  %3 = fuel.reshape %2 : tensor<1x?x4xf32> -> tensor<?x2x2xf32>
  func.return %3 : tensor<?x2x2xf32>
}

// A value of the symbols alone: arange(seq) and a seq x seq fill, folded when a run binds seq.

// CHECK-LABEL: func.func @iota
// CHECK-NEXT:    %[[P:.*]] = fuel.iota shape = ["seq"] start = "0" step = 1.000000e+00 : f64 axis = 0 : tensor<?xi64>
// CHECK-NEXT:    %[[F:.*]] = fuel.iota shape = [1 : i64, "seq", "2*seq + 1"] start = "-inf" step = 0.000000e+00 : f64 axis = 0 : tensor<1x?x?xf32>
// CHECK-NEXT:    func.return %[[P]], %[[F]]
func.func @iota(%ids: tensor<1x?xi64> {fuel.dim_names = ["seq"]}) -> (tensor<?xi64>, tensor<1x?x?xf32>) attributes {fuel.dims = {seq = #fuel.dim<1, 64>}} {
  %p = fuel.iota shape = ["seq"] start = "0" step = 1.0 : f64 axis = 0 : tensor<?xi64>
  %f = fuel.iota shape = [1, "seq", "2*seq + 1"] start = "-inf" step = 0.0 : f64 axis = 0 : tensor<1x?x?xf32>
  func.return %p, %f : tensor<?xi64>, tensor<1x?x?xf32>
}

// Rows of batch*seq split back into batch and seq: the input's one `?` cannot say which result
// dim is which, so the reshape writes its dims in the symbols.

// CHECK-LABEL: func.func @reshape_written_dims
// CHECK-NEXT:    %[[F:.*]] = fuel.reshape %{{.*}} : tensor<?x?x4xf32> -> tensor<?x4xf32>
// CHECK-NEXT:    %[[Y:.*]] = fuel.reshape %[[F]] {dims = ["batch", "seq", 4 : i64]} : tensor<?x4xf32> -> tensor<?x?x4xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<?x?x4xf32>
func.func @reshape_written_dims(%x: tensor<?x?x4xf32> {fuel.dim_names = ["batch", "seq"]}) -> tensor<?x?x4xf32> attributes {fuel.dims = {batch = #fuel.dim<1, 8>, seq = #fuel.dim<1, 64>}} {
  %0 = fuel.reshape %x : tensor<?x?x4xf32> -> tensor<?x4xf32>
  %1 = fuel.reshape %0 {dims = ["batch", "seq", 4]} : tensor<?x4xf32> -> tensor<?x?x4xf32>
  func.return %1 : tensor<?x?x4xf32>
}
