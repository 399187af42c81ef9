// RUN: fuel-opt %s -p fuel-canonicalize | filecheck %s
// RUN: fuel-opt %s -p fuel-canonicalize | fuel-opt -p fuel-canonicalize | filecheck %s

// torch.onnx's erf GELU, (y * (1 + erf(y / sqrt 2))) * 0.5, and the halving first with the
// division written as a product by sqrt(1/2).
// CHECK-LABEL: func.func @gelu_erf
// CHECK-SAME:    (%[[Y:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.gelu %[[Y]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.gelu %[[Y]] : tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[A]], %[[B]]
func.func @gelu_erf(%y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %sqrt2 = fuel.constant dense<1.41421354> : tensor<f32>
  %one = fuel.constant dense<1.000000e+00> : tensor<f32>
  %half = fuel.constant dense<5.000000e-01> : tensor<f32>
  %d = fuel.div %y, %sqrt2 : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %e = fuel.erf %d : tensor<4x8xf32>
  %g = fuel.add %e, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %p = fuel.mul %y, %g : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %a = fuel.mul %p, %half : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %rs2 = fuel.constant dense<0.707106769> : tensor<f32>
  %h = fuel.mul %half, %y : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %d2 = fuel.mul %rs2, %y : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %e2 = fuel.erf %d2 : tensor<4x8xf32>
  %g2 = fuel.add %one, %e2 : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %b = fuel.mul %h, %g2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// GPT-2's tanh GELU, 0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 pow(y, 3)))), and the factored
// form y (1 + tanh(sqrt(2/pi) y (1 + 0.044715 y y))) / 2.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-SAME:    (%[[Y:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.gelu %[[Y]] tanh : tensor<8xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.gelu %[[Y]] tanh : tensor<8xf32>
// CHECK-NEXT:    func.return %[[A]], %[[B]]
func.func @gelu_tanh(%y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %half = fuel.constant dense<5.000000e-01> : tensor<f32>
  %three = fuel.constant dense<3.000000e+00> : tensor<f32>
  %k1 = fuel.constant dense<4.471500e-02> : tensor<f32>
  %k0 = fuel.constant dense<0.797884583> : tensor<f32>
  %one = fuel.constant dense<1.000000e+00> : tensor<f32>
  %two = fuel.constant dense<2.000000e+00> : tensor<f32>
  %h = fuel.mul %y, %half : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %c = fuel.pow %y, %three : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %kc = fuel.mul %c, %k1 : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %s = fuel.add %y, %kc : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %i = fuel.mul %s, %k0 : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %t = fuel.tanh %i : tensor<8xf32>
  %g = fuel.add %t, %one : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %a = fuel.mul %h, %g : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %sq = fuel.mul %y, %y : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %ksq = fuel.mul %k1, %sq : tensor<f32>, tensor<8xf32> -> tensor<8xf32>
  %f = fuel.add %one, %ksq : tensor<f32>, tensor<8xf32> -> tensor<8xf32>
  %yf = fuel.mul %y, %f : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %i2 = fuel.mul %k0, %yf : tensor<f32>, tensor<8xf32> -> tensor<8xf32>
  %t2 = fuel.tanh %i2 : tensor<8xf32>
  %g2 = fuel.add %one, %t2 : tensor<f32>, tensor<8xf32> -> tensor<8xf32>
  %p2 = fuel.mul %g2, %y : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %b = fuel.div %p2, %two : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  func.return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// Not a GELU: a wrong constant (0.6), and an erf whose value is also returned (kept whole).
// CHECK-LABEL: func.func @gelu_not_applied
// CHECK-NOT:     fuel.gelu
// CHECK:         %[[BAD:.*]] = fuel.constant dense<6.000000e-01>
// CHECK-NOT:     fuel.gelu
// CHECK:         %[[A:.*]] = fuel.mul %{{.*}}, %[[BAD]] :
// CHECK-NOT:     fuel.gelu
// CHECK:         %[[E2:.*]] = fuel.erf
// CHECK-NOT:     fuel.gelu
// CHECK:         %[[P2:.*]] = fuel.mul %{{.*}}, %{{.*}} :
// CHECK-NEXT:    %[[B:.*]] = fuel.mul %[[P2]],
// CHECK-NEXT:    func.return %[[A]], %[[B]], %[[E2]]
func.func @gelu_not_applied(%y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %sqrt2 = fuel.constant dense<1.41421354> : tensor<f32>
  %one = fuel.constant dense<1.000000e+00> : tensor<f32>
  %bad = fuel.constant dense<6.000000e-01> : tensor<f32>
  %half = fuel.constant dense<5.000000e-01> : tensor<f32>
  %d = fuel.div %y, %sqrt2 : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %e = fuel.erf %d : tensor<8xf32>
  %g = fuel.add %e, %one : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %p = fuel.mul %y, %g : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %a = fuel.mul %p, %bad : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %d2 = fuel.div %y, %sqrt2 : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %e2 = fuel.erf %d2 : tensor<8xf32>
  %g2 = fuel.add %e2, %one : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %p2 = fuel.mul %y, %g2 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %b = fuel.mul %p2, %half : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  func.return %a, %b, %e2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// x * sigmoid(x), either order -> silu.
// CHECK-LABEL: func.func @silu
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.silu %[[X]] : tensor<4xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.silu %[[X]] : tensor<4xf32>
// CHECK-NEXT:    func.return %[[A]], %[[B]]
func.func @silu(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s = fuel.sigmoid %x : tensor<4xf32>
  %a = fuel.mul %x, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %s2 = fuel.sigmoid %x : tensor<4xf32>
  %b = fuel.mul %s2, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// A sigmoid read elsewhere too, or of another value, stays.
// CHECK-LABEL: func.func @silu_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>, %[[Z:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[S:.*]] = fuel.sigmoid %[[X]]
// CHECK-NEXT:    %[[A:.*]] = fuel.mul %[[X]], %[[S]]
// CHECK-NEXT:    %[[T:.*]] = fuel.sigmoid %[[Z]]
// CHECK-NEXT:    %[[B:.*]] = fuel.mul %[[X]], %[[T]]
// CHECK-NEXT:    func.return %[[A]], %[[S]], %[[B]]
func.func @silu_not_applied(%x: tensor<4xf32>, %z: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %s = fuel.sigmoid %x : tensor<4xf32>
  %a = fuel.mul %x, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %t = fuel.sigmoid %z : tensor<4xf32>
  %b = fuel.mul %x, %t : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %a, %s, %b : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// GPT-2's Conv1D: the activation moves above the reshape back to 3-D, onto the bias add.
// CHECK-LABEL: func.func @hoist_activation
// CHECK-SAME:    (%[[H:.*]]: tensor<12x64xf32>)
// CHECK-NEXT:    %[[G:.*]] = fuel.gelu %[[H]] tanh : tensor<12x64xf32>
// CHECK-NEXT:    %[[R:.*]] = fuel.reshape %[[G]] : tensor<12x64xf32> -> tensor<1x12x64xf32>
// CHECK-NEXT:    func.return %[[R]]
func.func @hoist_activation(%h: tensor<12x64xf32>) -> tensor<1x12x64xf32> {
  %r = fuel.reshape %h : tensor<12x64xf32> -> tensor<1x12x64xf32>
  %g = fuel.gelu %r tanh : tensor<1x12x64xf32>
  func.return %g : tensor<1x12x64xf32>
}

// A reshape read elsewhere too stays where it is (else both shapes would be computed).
// CHECK-LABEL: func.func @hoist_activation_not_applied
// CHECK-SAME:    (%[[H:.*]]: tensor<12x64xf32>)
// CHECK-NEXT:    %[[R:.*]] = fuel.reshape %[[H]]
// CHECK-NEXT:    %[[G:.*]] = fuel.relu %[[R]] : tensor<1x12x64xf32>
// CHECK-NEXT:    func.return %[[G]], %[[R]]
func.func @hoist_activation_not_applied(%h: tensor<12x64xf32>) -> (tensor<1x12x64xf32>, tensor<1x12x64xf32>) {
  %r = fuel.reshape %h : tensor<12x64xf32> -> tensor<1x12x64xf32>
  %g = fuel.relu %r : tensor<1x12x64xf32>
  func.return %g, %r : tensor<1x12x64xf32>, tensor<1x12x64xf32>
}
