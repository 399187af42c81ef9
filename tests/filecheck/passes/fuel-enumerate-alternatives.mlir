// RUN: fuel-opt %s -p 'fuel-enumerate-alternatives{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none"}' | filecheck %s

// Every registered sibling on every device's backends, unpriced, in enumeration order: the cpu's
// numpy kernels (matmul: torch-blas first where torch is installed), then the Triton kernels the
// cuda devices load (matmul: one per tile config).
// CHECK-LABEL: func.func @matmul_exp
// CHECK-NEXT:    %[[W:.*]] = fuel.weight "w" : tensor<8x8xf32>
// CHECK-NEXT:    %[[M:.*]] = fuel.matmul %{{.*}}, %[[W]] {fuel.alternatives = [{{(#fuel.candidate<"torch-blas", backend "cpu", device "cpu", [^>]*>, )?}}#fuel.candidate<"numpy", backend "cpu", device "cpu", rev "{{[0-9a-f]+}}", l1 = 0.0, judge = none, xfer = 0.0, verdict "enumerated">
// CHECK-SAME:    #fuel.candidate<"triton", backend "cuda", device "cuda:0", rev "{{[0-9a-f]+}}", l1 = 0.0, judge = none, xfer = 0.0, verdict "enumerated">
// CHECK-SAME:    #fuel.candidate<"triton", backend "cuda", device "cuda:1", rev "{{[0-9a-f]+}}", l1 = 0.0, judge = none, xfer = 0.0, verdict "enumerated">
// CHECK-NEXT:    %{{.*}} = fuel.exp %[[M]] {fuel.alternatives = [#fuel.candidate<"numpy", backend "cpu", device "cpu", rev "{{[0-9a-f]+}}", l1 = 0.0, judge = none, xfer = 0.0, verdict "enumerated">
func.func @matmul_exp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = fuel.weight "w" : tensor<8x8xf32>
  %0 = fuel.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %1 = fuel.exp %0 : tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}

// Views, weights and constants are not decision points; stale decisions are cleared.
// CHECK-LABEL: func.func @matmul_exp_not_applied
// CHECK-NEXT:    %[[C:.*]] = fuel.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT:    %[[R:.*]] = fuel.reshape %[[C]] : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<32xf32>
func.func @matmul_exp_not_applied() -> tensor<32xf32> {
  %c = fuel.constant dense<1.0> : tensor<4x8xf32>
  %r = fuel.reshape %c {fuel.device = #fuel.device<"cuda:0">} : tensor<4x8xf32> -> tensor<32xf32>
  func.return %r : tensor<32xf32>
}
