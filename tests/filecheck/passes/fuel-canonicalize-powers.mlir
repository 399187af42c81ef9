// RUN: fuel-opt %s -p fuel-canonicalize | filecheck %s
// RUN: fuel-opt %s -p fuel-canonicalize | fuel-opt -p fuel-canonicalize | filecheck %s

// pow by a constant exponent becomes the ops it spells (passes/canonical/powers.py).
// CHECK-LABEL: func.func @pow_two_three
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[SQ:.*]] = fuel.mul %[[X]], %[[X]] : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[SQ3:.*]] = fuel.mul %[[X]], %[[X]]
// CHECK-NEXT:    %[[CUBE:.*]] = fuel.mul %[[SQ3]], %[[X]]
// CHECK-NEXT:    func.return %[[SQ]], %[[CUBE]]
func.func @pow_two_three(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = fuel.constant dense<2.000000e+00> : tensor<f32>
  %sq = fuel.pow %x, %two : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %three = fuel.constant dense<3.000000e+00> : tensor<1xf32>
  %cube = fuel.pow %x, %three : tensor<4x8xf32>, tensor<1xf32> -> tensor<4x8xf32>
  func.return %sq, %cube : tensor<4x8xf32>, tensor<4x8xf32>
}

// 1 -> x, 0.5 -> sqrt, -0.5 -> rsqrt, -1 -> recip.
// CHECK-LABEL: func.func @pow_roots
// CHECK-SAME:    (%[[X:.*]]: tensor<3xf16>)
// CHECK-NEXT:    %[[S:.*]] = fuel.sqrt %[[X]] : tensor<3xf16>
// CHECK-NEXT:    %[[R:.*]] = fuel.rsqrt %[[X]] : tensor<3xf16>
// CHECK-NEXT:    %[[I:.*]] = fuel.recip %[[X]] : tensor<3xf16>
// CHECK-NEXT:    func.return %[[X]], %[[S]], %[[R]], %[[I]]
func.func @pow_roots(%x: tensor<3xf16>) -> (tensor<3xf16>, tensor<3xf16>, tensor<3xf16>, tensor<3xf16>) {
  %c1 = fuel.constant dense<1.000000e+00> : tensor<f16>
  %p1 = fuel.pow %x, %c1 : tensor<3xf16>, tensor<f16> -> tensor<3xf16>
  %ch = fuel.constant dense<5.000000e-01> : tensor<f16>
  %ph = fuel.pow %x, %ch : tensor<3xf16>, tensor<f16> -> tensor<3xf16>
  %cmh = fuel.constant dense<-5.000000e-01> : tensor<f16>
  %pmh = fuel.pow %x, %cmh : tensor<3xf16>, tensor<f16> -> tensor<3xf16>
  %cm1 = fuel.constant dense<-1.000000e+00> : tensor<f16>
  %pm1 = fuel.pow %x, %cm1 : tensor<3xf16>, tensor<f16> -> tensor<3xf16>
  func.return %p1, %ph, %pmh, %pm1 : tensor<3xf16>, tensor<3xf16>, tensor<3xf16>, tensor<3xf16>
}

// Other exponents stay, as do an exponent that is not a constant and one that broadcasts x up.
// CHECK-LABEL: func.func @pow_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>, %[[E:.*]]: tensor<f32>)
// CHECK-NEXT:    %[[C:.*]] = fuel.constant dense<2.500000e+00>
// CHECK-NEXT:    %[[A:.*]] = fuel.pow %[[X]], %[[C]]
// CHECK-NEXT:    %[[B:.*]] = fuel.pow %[[X]], %[[E]]
// CHECK-NEXT:    %[[T:.*]] = fuel.constant dense<2.000000e+00> : tensor<2x1xf32>
// CHECK-NEXT:    %[[D:.*]] = fuel.pow %[[X]], %[[T]] : tensor<4xf32>, tensor<2x1xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %[[A]], %[[B]], %[[D]]
func.func @pow_not_applied(%x: tensor<4xf32>, %e: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>) {
  %c = fuel.constant dense<2.500000e+00> : tensor<f32>
  %a = fuel.pow %x, %c : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %b = fuel.pow %x, %e : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %t = fuel.constant dense<2.000000e+00> : tensor<2x1xf32>
  %d = fuel.pow %x, %t : tensor<4xf32>, tensor<2x1xf32> -> tensor<2x4xf32>
  func.return %a, %b, %d : tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>
}
