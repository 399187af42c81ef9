// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// reshape keeps the element count: split, merge, to and from 0-d.
// CHECK-LABEL: func.func @reshape
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[S:.*]]: tensor<1x1xi64>)
// CHECK-NEXT:    %[[A:.*]] = fuel.reshape %[[X]] : tensor<4x8xf32> -> tensor<2x16xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.reshape %[[A]] : tensor<2x16xf32> -> tensor<2x2x8xf32>
// CHECK-NEXT:    %[[C:.*]] = fuel.reshape %[[S]] : tensor<1x1xi64> -> tensor<i64>
// CHECK-NEXT:    %{{.*}} = fuel.reshape %[[C]] : tensor<i64> -> tensor<1xi64>
// CHECK-NEXT:    func.return %[[B]] : tensor<2x2x8xf32>
func.func @reshape(%x: tensor<4x8xf32>, %s: tensor<1x1xi64>) -> tensor<2x2x8xf32> {
  %0 = fuel.reshape %x : tensor<4x8xf32> -> tensor<2x16xf32>
  %1 = fuel.reshape %0 : tensor<2x16xf32> -> tensor<2x2x8xf32>
  %2 = fuel.reshape %s : tensor<1x1xi64> -> tensor<i64>
  %3 = fuel.reshape %2 : tensor<i64> -> tensor<1xi64>
  func.return %1 : tensor<2x2x8xf32>
}

// transpose: result dim i is input dim perm[i].
// CHECK-LABEL: func.func @transpose
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xbf16>)
// CHECK-NEXT:    %[[A:.*]] = fuel.transpose %[[X]] perm = [2, 0, 1] : tensor<2x3x4xbf16> -> tensor<4x2x3xbf16>
// CHECK-NEXT:    %[[B:.*]] = fuel.transpose %[[A]] perm = [0, 2, 1] : tensor<4x2x3xbf16> -> tensor<4x3x2xbf16>
// CHECK-NEXT:    func.return %[[B]] : tensor<4x3x2xbf16>
func.func @transpose(%x: tensor<2x3x4xbf16>) -> tensor<4x3x2xbf16> {
  %0 = fuel.transpose %x perm = [2, 0, 1] : tensor<2x3x4xbf16> -> tensor<4x2x3xbf16>
  %1 = fuel.transpose %0 perm = [0, 2, 1] : tensor<4x2x3xbf16> -> tensor<4x3x2xbf16>
  func.return %1 : tensor<4x3x2xbf16>
}

// slice: steps > 1, negative starts and limits (from the end), clamped and empty ranges.
// CHECK-LABEL: func.func @slice
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %{{.*}} = fuel.slice %[[X]] starts = [0, 2] limits = [4, 8] steps = [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    %{{.*}} = fuel.slice %[[X]] starts = [-1, -3] limits = [4, 8] steps = [1, 1] : tensor<4x8xf32> -> tensor<1x3xf32>
// CHECK-NEXT:    %{{.*}} = fuel.slice %[[X]] starts = [-100, 1] limits = [-1, 100] steps = [2, 3] : tensor<4x8xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    %[[E:.*]] = fuel.slice %[[X]] starts = [3, 5] limits = [1, 5] steps = [1, 1] : tensor<4x8xf32> -> tensor<0x0xf32>
// CHECK-NEXT:    func.return %[[E]] : tensor<0x0xf32>
func.func @slice(%x: tensor<4x8xf32>) -> tensor<0x0xf32> {
  %0 = fuel.slice %x starts = [0, 2] limits = [4, 8] steps = [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32>
  %1 = fuel.slice %x starts = [-1, -3] limits = [4, 8] steps = [1, 1] : tensor<4x8xf32> -> tensor<1x3xf32>
  %2 = fuel.slice %x starts = [-100, 1] limits = [-1, 100] steps = [2, 3] : tensor<4x8xf32> -> tensor<2x3xf32>
  %3 = fuel.slice %x starts = [3, 5] limits = [1, 5] steps = [1, 1] : tensor<4x8xf32> -> tensor<0x0xf32>
  func.return %3 : tensor<0x0xf32>
}

// concat of one input (a copy), three inputs, and along a negative axis.
// CHECK-LABEL: func.func @concat
// CHECK-SAME:    (%[[A:.*]]: tensor<2x8xf16>, %[[B:.*]]: tensor<3x8xf16>, %[[C:.*]]: tensor<1x8xf16>)
// CHECK-NEXT:    %{{.*}} = fuel.concat %[[A]] axis = 0 : tensor<2x8xf16> -> tensor<2x8xf16>
// CHECK-NEXT:    %[[R:.*]] = fuel.concat %[[A]], %[[B]], %[[C]] axis = 0 : tensor<2x8xf16>, tensor<3x8xf16>, tensor<1x8xf16> -> tensor<6x8xf16>
// CHECK-NEXT:    %{{.*}} = fuel.concat %[[A]], %[[A]] axis = -1 : tensor<2x8xf16>, tensor<2x8xf16> -> tensor<2x16xf16>
// CHECK-NEXT:    func.return %[[R]] : tensor<6x8xf16>
func.func @concat(%a: tensor<2x8xf16>, %b: tensor<3x8xf16>, %c: tensor<1x8xf16>) -> tensor<6x8xf16> {
  %0 = fuel.concat %a axis = 0 : tensor<2x8xf16> -> tensor<2x8xf16>
  %1 = fuel.concat %a, %b, %c axis = 0 : tensor<2x8xf16>, tensor<3x8xf16>, tensor<1x8xf16> -> tensor<6x8xf16>
  %2 = fuel.concat %a, %a axis = -1 : tensor<2x8xf16>, tensor<2x8xf16> -> tensor<2x16xf16>
  func.return %1 : tensor<6x8xf16>
}

// gather: an embedding lookup (axis 0, i64 ids), an inner axis with i32 indices, a 0-d index.
// CHECK-LABEL: func.func @gather
// CHECK-SAME:    (%[[T:.*]]: tensor<100x16xf32>, %[[I:.*]]: tensor<2x5xi64>, %[[X:.*]]: tensor<3x4x5xi8>, %[[J:.*]]: tensor<6xi32>, %[[K:.*]]: tensor<i64>)
// CHECK-NEXT:    %[[E:.*]] = fuel.gather %[[T]], %[[I]] axis = 0 : tensor<100x16xf32>, tensor<2x5xi64> -> tensor<2x5x16xf32>
// CHECK-NEXT:    %{{.*}} = fuel.gather %[[X]], %[[J]] axis = -2 : tensor<3x4x5xi8>, tensor<6xi32> -> tensor<3x6x5xi8>
// CHECK-NEXT:    %{{.*}} = fuel.gather %[[T]], %[[K]] axis = 0 : tensor<100x16xf32>, tensor<i64> -> tensor<16xf32>
// CHECK-NEXT:    func.return %[[E]] : tensor<2x5x16xf32>
func.func @gather(%t: tensor<100x16xf32>, %i: tensor<2x5xi64>, %x: tensor<3x4x5xi8>, %j: tensor<6xi32>, %k: tensor<i64>) -> tensor<2x5x16xf32> {
  %0 = fuel.gather %t, %i axis = 0 : tensor<100x16xf32>, tensor<2x5xi64> -> tensor<2x5x16xf32>
  %1 = fuel.gather %x, %j axis = -2 : tensor<3x4x5xi8>, tensor<6xi32> -> tensor<3x6x5xi8>
  %2 = fuel.gather %t, %k axis = 0 : tensor<100x16xf32>, tensor<i64> -> tensor<16xf32>
  func.return %0 : tensor<2x5x16xf32>
}

// index_copy: a KV-cache row at a run-time slot in layer 1 of a stacked cache (offsets), and
// rows along axis 0 at i32 positions, with a dim symbol's `?` rows.
// CHECK-LABEL: func.func @index_copy
// CHECK-SAME:    (%[[C:.*]]: tensor<4x1x2x8x4xf32>, %[[K:.*]]: tensor<1x1x2x1x4xf32>, %[[P:.*]]: tensor<1xi64>, %[[X:.*]]: tensor<6x3xi8>, %[[R:.*]]: tensor<?x3xi8> {fuel.dim_names = ["n"]}, %[[J:.*]]: tensor<?xi32> {fuel.dim_names = ["n"]})
// CHECK-NEXT:    %[[W:.*]] = fuel.index_copy %[[C]], %[[K]], %[[P]] axis = 3 offsets = [1, 0, 0, 0, 0] : tensor<4x1x2x8x4xf32>, tensor<1x1x2x1x4xf32>, tensor<1xi64> -> tensor<4x1x2x8x4xf32>
// CHECK-NEXT:    %{{.*}} = fuel.index_copy %[[X]], %[[R]], %[[J]] axis = 0 offsets = [0, 0] : tensor<6x3xi8>, tensor<?x3xi8>, tensor<?xi32> -> tensor<6x3xi8>
// CHECK-NEXT:    func.return %[[W]] : tensor<4x1x2x8x4xf32>
func.func @index_copy(%c: tensor<4x1x2x8x4xf32>, %k: tensor<1x1x2x1x4xf32>, %p: tensor<1xi64>, %x: tensor<6x3xi8>, %r: tensor<?x3xi8> {fuel.dim_names = ["n"]}, %j: tensor<?xi32> {fuel.dim_names = ["n"]}) -> tensor<4x1x2x8x4xf32> attributes {fuel.dims = {n = #fuel.dim<1, 6>}} {
  %0 = fuel.index_copy %c, %k, %p axis = 3 offsets = [1, 0, 0, 0, 0] : tensor<4x1x2x8x4xf32>, tensor<1x1x2x1x4xf32>, tensor<1xi64> -> tensor<4x1x2x8x4xf32>
  %1 = fuel.index_copy %x, %r, %j axis = 0 offsets = [0, 0] : tensor<6x3xi8>, tensor<?x3xi8>, tensor<?xi32> -> tensor<6x3xi8>
  func.return %0 : tensor<4x1x2x8x4xf32>
}

// Inline constants: dense lists, splats, 0-d, every kind of element type.
// CHECK-LABEL: func.func @constant
// CHECK-NEXT:    %[[A:.*]] = fuel.constant dense<[1.000000e+00, 2.500000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %{{.*}} = fuel.constant dense<0.000000e+00> : tensor<4x8xbf16>
// CHECK-NEXT:    %{{.*}} = fuel.constant dense<1.500000e+00> : tensor<f16> {fuel.name = "half"}
// CHECK-NEXT:    %{{.*}} = fuel.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi64>
// CHECK-NEXT:    %{{.*}} = fuel.constant dense<7> : tensor<i32>
// CHECK-NEXT:    %{{.*}} = fuel.constant dense<255> : tensor<3xui8>
// CHECK-NEXT:    %{{.*}} = fuel.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT:    func.return %[[A]] : tensor<2xf32>
func.func @constant() -> tensor<2xf32> {
  %0 = fuel.constant dense<[1.0, 2.5]> : tensor<2xf32>
  %1 = fuel.constant dense<0.0> : tensor<4x8xbf16>
  %2 = fuel.constant dense<1.5> : tensor<f16> {fuel.name = "half"}
  %3 = fuel.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi64>
  %4 = fuel.constant dense<7> : tensor<i32>
  %5 = fuel.constant dense<255> : tensor<3xui8>
  %6 = fuel.constant dense<[true, false]> : tensor<2xi1>
  func.return %0 : tensor<2xf32>
}

// Named parameters whose data lives in the module's safetensors file.
// CHECK-LABEL: func.func @weight
// CHECK-NEXT:    %[[W:.*]] = fuel.weight "layers.0.mlp.w1" : tensor<512x1376xf32>
// CHECK-NEXT:    %{{.*}} = fuel.weight "tok_embeddings.weight" {fuel.device = #fuel.device<"cuda:0">} : tensor<32000x8xbf16>
// CHECK-NEXT:    func.return %[[W]] : tensor<512x1376xf32>
func.func @weight() -> tensor<512x1376xf32> {
  %0 = fuel.weight "layers.0.mlp.w1" : tensor<512x1376xf32>
  %1 = fuel.weight "tok_embeddings.weight" {fuel.device = #fuel.device<"cuda:0">} : tensor<32000x8xbf16>
  func.return %0 : tensor<512x1376xf32>
}
