// RUN: fuel-opt %s -p fuel-canonicalize | filecheck %s
// RUN: fuel-opt %s -p fuel-canonicalize | fuel-opt -p fuel-canonicalize | filecheck %s

// x * 1, 1 * x (a splat of ones that does not widen x) and x / 1 are x.
// CHECK-LABEL: func.func @identity_mul_div
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4xf32>)
// CHECK-NEXT:    func.return %[[X]], %[[X]], %[[X]]
func.func @identity_mul_div(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %one = fuel.constant dense<1.000000e+00> : tensor<f32>
  %ones = fuel.constant dense<1.000000e+00> : tensor<4xf32>
  %a = fuel.mul %x, %one : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  %b = fuel.mul %ones, %x : tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %c = fuel.div %x, %one : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  func.return %a, %b, %c : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// x + (-0.0), (-0.0) + x and x - (+0.0) are x for every float x (-0 included); an integer
// x + 0 too.
// CHECK-LABEL: func.func @identity_add_sub
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4xf32>, %[[I:.*]]: tensor<3xi64>)
// CHECK-NEXT:    func.return %[[X]], %[[X]], %[[X]], %[[I]]
func.func @identity_add_sub(%x: tensor<2x4xf32>, %i: tensor<3xi64>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<3xi64>) {
  %nz = fuel.constant dense<-0.000000e+00> : tensor<f32>
  %pz = fuel.constant dense<0.000000e+00> : tensor<f32>
  %iz = fuel.constant dense<0> : tensor<i64>
  %a = fuel.add %x, %nz : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  %b = fuel.add %nz, %x : tensor<f32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %c = fuel.sub %x, %pz : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  %d = fuel.add %i, %iz : tensor<3xi64>, tensor<i64> -> tensor<3xi64>
  func.return %a, %b, %c, %d : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<3xi64>
}

// HF's rotary tables times attention_scaling (1.0) at a symbolic seq: the table itself.
// CHECK-LABEL: func.func @identity_symbolic
// CHECK-SAME:    (%[[T:[^:]*]]: tensor<1x?x64xf32>
// CHECK-NEXT:    %[[C:.*]] = fuel.cos %[[T]]
// CHECK-NEXT:    func.return %[[C]]
func.func @identity_symbolic(%t: tensor<1x?x64xf32> {fuel.dim_names = ["seq"]}) -> tensor<1x?x64xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 256>}} {
  %c = fuel.cos %t : tensor<1x?x64xf32>
  %one = fuel.constant dense<1.000000e+00> : tensor<f32>
  %y = fuel.mul %c, %one : tensor<1x?x64xf32>, tensor<f32> -> tensor<1x?x64xf32>
  func.return %y : tensor<1x?x64xf32>
}

// Not identities: x + (+0.0) (-0 + 0 = +0), x - (-0.0) (-0 - -0 = +0), ones that widen x,
// ones that are not all one, 1 / x, and 0 - x.
// CHECK-LABEL: func.func @identity_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK:         %[[A:.*]] = fuel.add %[[X]], %{{.*}} : tensor<4xf32>, tensor<f32>
// CHECK-NEXT:    %[[B:.*]] = fuel.sub %[[X]], %{{.*}} : tensor<4xf32>, tensor<f32>
// CHECK-NEXT:    %[[C:.*]] = fuel.mul %[[X]], %{{.*}} : tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    %[[D:.*]] = fuel.mul %[[X]], %{{.*}} : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    %[[E:.*]] = fuel.div %{{.*}}, %[[X]] : tensor<f32>, tensor<4xf32>
// CHECK-NEXT:    %[[F:.*]] = fuel.sub %{{.*}}, %[[X]] : tensor<f32>, tensor<4xf32>
// CHECK-NEXT:    func.return %[[A]], %[[B]], %[[C]], %[[D]], %[[E]], %[[F]]
func.func @identity_not_applied(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %pz = fuel.constant dense<0.000000e+00> : tensor<f32>
  %nz = fuel.constant dense<-0.000000e+00> : tensor<f32>
  %one = fuel.constant dense<1.000000e+00> : tensor<f32>
  %wide = fuel.constant dense<1.000000e+00> : tensor<2x4xf32>
  %mixed = fuel.constant dense<[1.000000e+00, 1.000000e+00, 2.000000e+00, 1.000000e+00]> : tensor<4xf32>
  %a = fuel.add %x, %pz : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %b = fuel.sub %x, %nz : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %c = fuel.mul %x, %wide : tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %d = fuel.mul %x, %mixed : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %e = fuel.div %one, %x : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %f = fuel.sub %pz, %x : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  func.return %a, %b, %c, %d, %e, %f : tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
