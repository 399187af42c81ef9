// RUN: fuel-opt %s -p 'fuel-rank-alternatives{judge="none"}' | filecheck %s

// Every candidate priced (l1 > 0) and ranked; the softmax row has a Layer-1 cost larger than
// the neg on the same shape (5 flops/element vs 1).
// CHECK-LABEL: func.func @ranked
// CHECK-NEXT:    %{{.*}} = fuel.neg %{{.*}} {fuel.alternatives = [#fuel.candidate<"{{[a-z0-9-]+}}", backend "cpu", device "cpu", rev "{{[0-9a-f]+}}", l1 = [[NEG:[0-9.e+]+]], judge = none, xfer = 0.0, verdict "ranked">
// CHECK-NEXT:    %{{.*}} = fuel.softmax {{.*}}{fuel.alternatives = [#fuel.candidate<"{{[a-z0-9-]+}}", backend "cpu", device "cpu", rev "{{[0-9a-f]+}}", l1 = {{[0-9.e+]+}}, judge = none, xfer = 0.0, verdict "ranked">
func.func @ranked(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = fuel.neg %x : tensor<64x64xf32>
  %1 = fuel.softmax %0 axis = 1 : tensor<64x64xf32> -> tensor<64x64xf32>
  func.return %1 : tensor<64x64xf32>
}

// A function without decision points is returned unchanged.
// CHECK-LABEL: func.func @ranked_not_applied
// CHECK-NEXT:    func.return %{{.*}} : tensor<4xf32>
func.func @ranked_not_applied(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
