// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// erf: float-only unary, every float width.
// CHECK-LABEL: func.func @erf
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[H:.*]]: tensor<3xbf16>)
// CHECK-NEXT:    %[[A:.*]] = fuel.erf %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    %{{.*}} = fuel.erf %[[H]] : tensor<3xbf16>
// CHECK-NEXT:    func.return %[[A]] : tensor<4x8xf32>
func.func @erf(%x: tensor<4x8xf32>, %h: tensor<3xbf16>) -> tensor<4x8xf32> {
  %0 = fuel.erf %x : tensor<4x8xf32>
  %1 = fuel.erf %h : tensor<3xbf16>
  func.return %0 : tensor<4x8xf32>
}

// broadcast: repeat size-1 dims, add leading dims, from a 0-d tensor, and the identity.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME:    (%[[X:.*]]: tensor<1x8xf32>, %[[S:.*]]: tensor<i1>)
// CHECK-NEXT:    %[[A:.*]] = fuel.broadcast %[[X]] : tensor<1x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %{{.*}} = fuel.broadcast %[[X]] : tensor<1x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    %{{.*}} = fuel.broadcast %[[S]] : tensor<i1> -> tensor<2x2xi1>
// CHECK-NEXT:    %{{.*}} = fuel.broadcast %[[X]] : tensor<1x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:    func.return %[[A]] : tensor<4x8xf32>
func.func @broadcast(%x: tensor<1x8xf32>, %s: tensor<i1>) -> tensor<4x8xf32> {
  %0 = fuel.broadcast %x : tensor<1x8xf32> -> tensor<4x8xf32>
  %1 = fuel.broadcast %x : tensor<1x8xf32> -> tensor<2x3x8xf32>
  %2 = fuel.broadcast %s : tensor<i1> -> tensor<2x2xi1>
  %3 = fuel.broadcast %x : tensor<1x8xf32> -> tensor<1x8xf32>
  func.return %0 : tensor<4x8xf32>
}
