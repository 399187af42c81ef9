// RUN: fuel-opt %s -p fuel-canonicalize | filecheck %s
// RUN: fuel-opt %s -p fuel-canonicalize | fuel-opt -p fuel-canonicalize | filecheck %s

// A sum over 64 elements divided by 64, or times 1/64 (either order), is a mean.
// CHECK-LABEL: func.func @sum_by_count
// CHECK-SAME:    (%[[X:.*]]: tensor<4x64xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.reduce_mean %[[X]] axes = [1] keepdim : tensor<4x64xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.reduce_mean %[[X]] axes = [-1] : tensor<4x64xf32> -> tensor<4xf32>
// CHECK-NEXT:    func.return %[[A]], %[[B]]
func.func @sum_by_count(%x: tensor<4x64xf32>) -> (tensor<4x1xf32>, tensor<4xf32>) {
  %n = fuel.constant dense<6.400000e+01> : tensor<f32>
  %s = fuel.reduce_sum %x axes = [1] keepdim : tensor<4x64xf32> -> tensor<4x1xf32>
  %a = fuel.div %s, %n : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
  %r = fuel.constant dense<1.562500e-02> : tensor<f32>
  %t = fuel.reduce_sum %x axes = [-1] : tensor<4x64xf32> -> tensor<4xf32>
  %b = fuel.mul %r, %t : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  func.return %a, %b : tensor<4x1xf32>, tensor<4xf32>
}

// Another divisor, an integer sum, or a sum also read elsewhere stays a sum.
// CHECK-LABEL: func.func @sum_by_count_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4x64xf32>, %[[I:.*]]: tensor<4x64xi32>)
// CHECK-NEXT:    %[[N:.*]] = fuel.constant dense<6.300000e+01>
// CHECK-NEXT:    %[[S:.*]] = fuel.reduce_sum %[[X]]
// CHECK-NEXT:    %[[A:.*]] = fuel.div %[[S]], %[[N]]
// CHECK-NEXT:    %[[M:.*]] = fuel.constant dense<64> : tensor<i32>
// CHECK-NEXT:    %[[T:.*]] = fuel.reduce_sum %[[I]]
// CHECK-NEXT:    %[[B:.*]] = fuel.mul %[[T]], %[[M]]
// CHECK-NEXT:    %[[K:.*]] = fuel.constant dense<6.400000e+01>
// CHECK-NEXT:    %[[U:.*]] = fuel.reduce_sum %[[X]]
// CHECK-NEXT:    %[[C:.*]] = fuel.div %[[U]], %[[K]]
// CHECK-NEXT:    func.return %[[A]], %[[B]], %[[C]], %[[U]]
func.func @sum_by_count_not_applied(%x: tensor<4x64xf32>, %i: tensor<4x64xi32>) -> (tensor<4xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>) {
  %n = fuel.constant dense<6.300000e+01> : tensor<f32>
  %s = fuel.reduce_sum %x axes = [1] : tensor<4x64xf32> -> tensor<4xf32>
  %a = fuel.div %s, %n : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %m = fuel.constant dense<64> : tensor<i32>
  %t = fuel.reduce_sum %i axes = [1] : tensor<4x64xi32> -> tensor<4xi32>
  %b = fuel.mul %t, %m : tensor<4xi32>, tensor<i32> -> tensor<4xi32>
  %k = fuel.constant dense<6.400000e+01> : tensor<f32>
  %u = fuel.reduce_sum %x axes = [1] : tensor<4x64xf32> -> tensor<4xf32>
  %c = fuel.div %u, %k : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  func.return %a, %b, %c, %u : tensor<4xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>
}
