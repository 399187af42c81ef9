// RUN: fuel-opt %s -p fuel-canonicalize | filecheck %s

// ONNX's RMSNorm: 1 / sqrt(mean + eps) becomes rsqrt, the sqrt goes.
// CHECK-LABEL: func.func @div_one_sqrt
// CHECK-SAME:    (%[[Y:.*]]: tensor<4x1xf32>)
// CHECK-NEXT:    %[[R:.*]] = fuel.rsqrt %[[Y]] : tensor<4x1xf32>
// CHECK-NEXT:    func.return %[[R]]
func.func @div_one_sqrt(%y: tensor<4x1xf32>) -> tensor<4x1xf32> {
  %one = fuel.constant dense<1.000000e+00> : tensor<f32>
  %s = fuel.sqrt %y : tensor<4x1xf32>
  %r = fuel.div %one, %s : tensor<f32>, tensor<4x1xf32> -> tensor<4x1xf32>
  func.return %r : tensor<4x1xf32>
}

// x / sqrt(y) becomes x * rsqrt(y), broadcasting as before.
// CHECK-LABEL: func.func @div_x_sqrt
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4x1xf32>)
// CHECK-NEXT:    %[[R:.*]] = fuel.rsqrt %[[Y]] : tensor<4x1xf32>
// CHECK-NEXT:    %[[M:.*]] = fuel.mul %[[X]], %[[R]] : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[M]]
func.func @div_x_sqrt(%x: tensor<4x8xf32>, %y: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %s = fuel.sqrt %y : tensor<4x1xf32>
  %r = fuel.div %x, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// recip(sqrt(y)) becomes rsqrt(y).
// CHECK-LABEL: func.func @recip_sqrt
// CHECK-SAME:    (%[[Y:.*]]: tensor<3xf16>)
// CHECK-NEXT:    %[[R:.*]] = fuel.rsqrt %[[Y]] : tensor<3xf16>
// CHECK-NEXT:    func.return %[[R]]
func.func @recip_sqrt(%y: tensor<3xf16>) -> tensor<3xf16> {
  %s = fuel.sqrt %y : tensor<3xf16>
  %r = fuel.recip %s : tensor<3xf16>
  func.return %r : tensor<3xf16>
}

// A sqrt with another user stays (rewriting would compute both); so does a sqrt numerator.
// CHECK-LABEL: func.func @div_sqrt_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[S:.*]] = fuel.sqrt %[[Y]] : tensor<4xf32>
// CHECK-NEXT:    %[[D:.*]] = fuel.div %[[X]], %[[S]]
// CHECK-NEXT:    %[[T:.*]] = fuel.sqrt %[[X]] : tensor<4xf32>
// CHECK-NEXT:    %[[E:.*]] = fuel.div %[[T]], %[[Y]]
// CHECK-NEXT:    func.return %[[D]], %[[S]], %[[E]]
func.func @div_sqrt_not_applied(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %s = fuel.sqrt %y : tensor<4xf32>
  %d = fuel.div %x, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %t = fuel.sqrt %x : tensor<4xf32>
  %e = fuel.div %t, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %d, %s, %e : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Running it again changes nothing (the rewrites are idempotent).
// CHECK-LABEL: func.func @already_canonical
// CHECK-NEXT:    %[[R:.*]] = fuel.rsqrt
// CHECK-NEXT:    %[[M:.*]] = fuel.mul
// CHECK-NEXT:    func.return %[[M]]
func.func @already_canonical(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %r = fuel.rsqrt %y : tensor<4xf32>
  %m = fuel.mul %x, %r : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %m : tensor<4xf32>
}
