// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// Arithmetic with numpy broadcasting: trailing dims, size-1 dims, 0-d, both sides growing.
// CHECK-LABEL: func.func @binary_broadcast
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[R:.*]]: tensor<8xf32>, %[[C:.*]]: tensor<4x1xf32>, %[[S:.*]]: tensor<f32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.add %[[X]], %[[R]] : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.sub %[[C]], %[[A]] : tensor<4x1xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[M:.*]] = fuel.mul %[[B]], %[[S]] : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[D:.*]] = fuel.div %[[S]], %[[M]] : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[P:.*]] = fuel.pow %[[D]], %[[C]] : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[O:.*]] = fuel.max %[[C]], %[[R]] : tensor<4x1xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[N:.*]] = fuel.min %[[P]], %[[O]] : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[N]] : tensor<4x8xf32>
func.func @binary_broadcast(%x: tensor<4x8xf32>, %r: tensor<8xf32>, %c: tensor<4x1xf32>, %s: tensor<f32>) -> tensor<4x8xf32> {
  %0 = fuel.add %x, %r : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = fuel.sub %c, %0 : tensor<4x1xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = fuel.mul %1, %s : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %3 = fuel.div %s, %2 : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = fuel.pow %3, %c : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %5 = fuel.max %c, %r : tensor<4x1xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %6 = fuel.min %4, %5 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %6 : tensor<4x8xf32>
}

// add/sub/mul/max/min on integers; rank-3 against rank-1 broadcasting.
// CHECK-LABEL: func.func @binary_int
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xi64>, %[[Y:.*]]: tensor<4xi64>, %[[U:.*]]: tensor<3xui8>)
// CHECK-NEXT:    %[[A:.*]] = fuel.add %[[X]], %[[Y]] : tensor<2x3x4xi64>, tensor<4xi64> -> tensor<2x3x4xi64>
// CHECK-NEXT:    %[[B:.*]] = fuel.mul %[[Y]], %[[A]] : tensor<4xi64>, tensor<2x3x4xi64> -> tensor<2x3x4xi64>
// CHECK-NEXT:    %{{.*}} = fuel.sub %[[U]], %[[U]] : tensor<3xui8>, tensor<3xui8> -> tensor<3xui8>
// CHECK-NEXT:    %{{.*}} = fuel.max %[[U]], %[[U]] : tensor<3xui8>, tensor<3xui8> -> tensor<3xui8>
// CHECK-NEXT:    %[[C:.*]] = fuel.min %[[B]], %[[Y]] : tensor<2x3x4xi64>, tensor<4xi64> -> tensor<2x3x4xi64>
// CHECK-NEXT:    func.return %[[C]] : tensor<2x3x4xi64>
func.func @binary_int(%x: tensor<2x3x4xi64>, %y: tensor<4xi64>, %u: tensor<3xui8>) -> tensor<2x3x4xi64> {
  %0 = fuel.add %x, %y : tensor<2x3x4xi64>, tensor<4xi64> -> tensor<2x3x4xi64>
  %1 = fuel.mul %y, %0 : tensor<4xi64>, tensor<2x3x4xi64> -> tensor<2x3x4xi64>
  %2 = fuel.sub %u, %u : tensor<3xui8>, tensor<3xui8> -> tensor<3xui8>
  %3 = fuel.max %u, %u : tensor<3xui8>, tensor<3xui8> -> tensor<3xui8>
  %4 = fuel.min %1, %y : tensor<2x3x4xi64>, tensor<4xi64> -> tensor<2x3x4xi64>
  func.return %4 : tensor<2x3x4xi64>
}

// Compares produce i1 and broadcast; eq/ne also compare i1 values.
// CHECK-LABEL: func.func @compare
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf16>, %[[Y:.*]]: tensor<8xf16>, %[[I:.*]]: tensor<3xi32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.eq %[[X]], %[[Y]] : tensor<4x8xf16>, tensor<8xf16> -> tensor<4x8xi1>
// CHECK-NEXT:    %[[B:.*]] = fuel.ne %[[A]], %[[A]] : tensor<4x8xi1>, tensor<4x8xi1> -> tensor<4x8xi1>
// CHECK-NEXT:    %{{.*}} = fuel.lt %[[Y]], %[[X]] : tensor<8xf16>, tensor<4x8xf16> -> tensor<4x8xi1>
// CHECK-NEXT:    %{{.*}} = fuel.le %[[I]], %[[I]] : tensor<3xi32>, tensor<3xi32> -> tensor<3xi1>
// CHECK-NEXT:    %{{.*}} = fuel.gt %[[X]], %[[X]] : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xi1>
// CHECK-NEXT:    %{{.*}} = fuel.ge %[[I]], %[[I]] : tensor<3xi32>, tensor<3xi32> -> tensor<3xi1>
// CHECK-NEXT:    func.return %[[B]] : tensor<4x8xi1>
func.func @compare(%x: tensor<4x8xf16>, %y: tensor<8xf16>, %i: tensor<3xi32>) -> tensor<4x8xi1> {
  %0 = fuel.eq %x, %y : tensor<4x8xf16>, tensor<8xf16> -> tensor<4x8xi1>
  %1 = fuel.ne %0, %0 : tensor<4x8xi1>, tensor<4x8xi1> -> tensor<4x8xi1>
  %2 = fuel.lt %y, %x : tensor<8xf16>, tensor<4x8xf16> -> tensor<4x8xi1>
  %3 = fuel.le %i, %i : tensor<3xi32>, tensor<3xi32> -> tensor<3xi1>
  %4 = fuel.gt %x, %x : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xi1>
  %5 = fuel.ge %i, %i : tensor<3xi32>, tensor<3xi32> -> tensor<3xi1>
  func.return %1 : tensor<4x8xi1>
}

// where broadcasts all three operands together.
// CHECK-LABEL: func.func @where
// CHECK-SAME:    (%[[C:.*]]: tensor<4x1xi1>, %[[X:.*]]: tensor<8xbf16>, %[[Y:.*]]: tensor<bf16>, %[[I:.*]]: tensor<4x3xi64>)
// CHECK-NEXT:    %[[A:.*]] = fuel.where %[[C]], %[[X]], %[[Y]] : tensor<4x1xi1>, tensor<8xbf16>, tensor<bf16> -> tensor<4x8xbf16>
// CHECK-NEXT:    %{{.*}} = fuel.where %[[C]], %[[I]], %[[I]] : tensor<4x1xi1>, tensor<4x3xi64>, tensor<4x3xi64> -> tensor<4x3xi64>
// CHECK-NEXT:    func.return %[[A]] : tensor<4x8xbf16>
func.func @where(%c: tensor<4x1xi1>, %x: tensor<8xbf16>, %y: tensor<bf16>, %i: tensor<4x3xi64>) -> tensor<4x8xbf16> {
  %0 = fuel.where %c, %x, %y : tensor<4x1xi1>, tensor<8xbf16>, tensor<bf16> -> tensor<4x8xbf16>
  %1 = fuel.where %c, %i, %i : tensor<4x1xi1>, tensor<4x3xi64>, tensor<4x3xi64> -> tensor<4x3xi64>
  func.return %0 : tensor<4x8xbf16>
}
