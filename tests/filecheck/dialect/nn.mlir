// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// Plain, batched (rank 3 x rank 2), broadcast batch dims (2x1 vs 3), and an integer matmul.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME:    (%[[A:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<2x4x8xf32>, %[[C:.*]]: tensor<2x1x4x8xf16>, %[[D:.*]]: tensor<3x8x5xf16>, %[[I:.*]]: tensor<8x8xi8>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.matmul %[[A]], %[[W]] : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %{{.*}} = fuel.matmul %[[B]], %[[W]] : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:    %{{.*}} = fuel.matmul %[[C]], %[[D]] : tensor<2x1x4x8xf16>, tensor<3x8x5xf16> -> tensor<2x3x4x5xf16>
// CHECK-NEXT:    %{{.*}} = fuel.matmul %[[I]], %[[I]] {fuel.device = #fuel.device<"cpu">} : tensor<8x8xi8>, tensor<8x8xi8> -> tensor<8x8xi8>
// CHECK-NEXT:    func.return %[[Y]] : tensor<4x16xf32>
func.func @matmul(%a: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<2x4x8xf32>, %c: tensor<2x1x4x8xf16>, %d: tensor<3x8x5xf16>, %i: tensor<8x8xi8>) -> tensor<4x16xf32> {
  %0 = fuel.matmul %a, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %1 = fuel.matmul %b, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %2 = fuel.matmul %c, %d : tensor<2x1x4x8xf16>, tensor<3x8x5xf16> -> tensor<2x3x4x5xf16>
  %3 = fuel.matmul %i, %i {fuel.device = #fuel.device<"cpu">} : tensor<8x8xi8>, tensor<8x8xi8> -> tensor<8x8xi8>
  func.return %0 : tensor<4x16xf32>
}

// The four reductions: one or several axes, negative axes, keepdim, down to a 0-d result.
// CHECK-LABEL: func.func @reduce
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xf32>, %[[I:.*]]: tensor<5x6xi32>)
// CHECK-NEXT:    %[[S:.*]] = fuel.reduce_sum %[[X]] axes = [-1] : tensor<2x3x4xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    %{{.*}} = fuel.reduce_sum %[[I]] axes = [0, 1] : tensor<5x6xi32> -> tensor<i32>
// CHECK-NEXT:    %{{.*}} = fuel.reduce_mean %[[X]] axes = [1] keepdim : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
// CHECK-NEXT:    %{{.*}} = fuel.reduce_mean %[[X]] axes = [-3, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
// CHECK-NEXT:    %{{.*}} = fuel.reduce_max %[[X]] axes = [-1, 0] keepdim : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
// CHECK-NEXT:    %{{.*}} = fuel.reduce_max %[[I]] axes = [1] : tensor<5x6xi32> -> tensor<5xi32>
// CHECK-NEXT:    %{{.*}} = fuel.reduce_min %[[I]] axes = [-2] keepdim : tensor<5x6xi32> -> tensor<1x6xi32>
// CHECK-NEXT:    %{{.*}} = fuel.reduce_min %[[X]] axes = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
// CHECK-NEXT:    func.return %[[S]] : tensor<2x3xf32>
func.func @reduce(%x: tensor<2x3x4xf32>, %i: tensor<5x6xi32>) -> tensor<2x3xf32> {
  %0 = fuel.reduce_sum %x axes = [-1] : tensor<2x3x4xf32> -> tensor<2x3xf32>
  %1 = fuel.reduce_sum %i axes = [0, 1] : tensor<5x6xi32> -> tensor<i32>
  %2 = fuel.reduce_mean %x axes = [1] keepdim : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %3 = fuel.reduce_mean %x axes = [-3, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
  %4 = fuel.reduce_max %x axes = [-1, 0] keepdim : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %5 = fuel.reduce_max %i axes = [1] : tensor<5x6xi32> -> tensor<5xi32>
  %6 = fuel.reduce_min %i axes = [-2] keepdim : tensor<5x6xi32> -> tensor<1x6xi32>
  %7 = fuel.reduce_min %x axes = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  func.return %0 : tensor<2x3xf32>
}

// softmax along a negative and a positive axis.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xbf16>)
// CHECK-NEXT:    %[[A:.*]] = fuel.softmax %[[X]] axis = -1 : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
// CHECK-NEXT:    %[[B:.*]] = fuel.softmax %[[A]] axis = 1 : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
// CHECK-NEXT:    func.return %[[B]] : tensor<2x4x8xbf16>
func.func @softmax(%x: tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16> {
  %0 = fuel.softmax %x axis = -1 : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
  %1 = fuel.softmax %0 axis = 1 : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
  func.return %1 : tensor<2x4x8xbf16>
}

// Last-dim norms; eps prints in MLIR float syntax.
// CHECK-LABEL: func.func @norms
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>, %[[H:.*]]: tensor<8xf16>)
// CHECK-NEXT:    %[[R:.*]] = fuel.rms_norm %[[X]], %[[W]] eps = 1.000000e-06 : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    %[[L:.*]] = fuel.layer_norm %[[R]], %[[W]], %[[B]] eps = 1.000000e-05 : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    %{{.*}} = fuel.rms_norm %[[H]], %[[H]] eps = 5.000000e-01 : tensor<8xf16>, tensor<8xf16> -> tensor<8xf16>
// CHECK-NEXT:    func.return %[[L]] : tensor<2x3x8xf32>
func.func @norms(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %h: tensor<8xf16>) -> tensor<2x3x8xf32> {
  %0 = fuel.rms_norm %x, %w eps = 1.0e-06 : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
  %1 = fuel.layer_norm %0, %w, %b eps = 1.0e-05 : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
  %2 = fuel.rms_norm %h, %h eps = 0.5 : tensor<8xf16>, tensor<8xf16> -> tensor<8xf16>
  func.return %1 : tensor<2x3x8xf32>
}
