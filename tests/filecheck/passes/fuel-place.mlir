// RUN: fuel-opt %s -p 'fuel-place{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none"}' | filecheck %s

// The cuda devices of the topology load the Triton kernels, but at these sizes the copies to a
// GPU cost more than they save: every decision point stays on the cpu. The winner comes first.
// CHECK-LABEL: func.func @softmax_matmul
// CHECK-NEXT:    %{{.*}} = fuel.weight
// CHECK-NEXT:    %[[M:.*]] = fuel.matmul {{.*}}{fuel.device = #fuel.device<"cpu">, fuel.alternatives = [#fuel.candidate<"{{[a-z0-9-]+}}", backend "cpu", device "cpu", rev "{{[0-9a-f]+}}", l1 = {{[0-9.e+]+}}, judge = none, xfer = 0.0, verdict "winner">
// CHECK-NEXT:    %{{.*}} = fuel.softmax %[[M]] axis = -1 {fuel.device = #fuel.device<"cpu">, fuel.alternatives = [#fuel.candidate<{{.*}}verdict "winner">
func.func @softmax_matmul(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = fuel.weight "w" : tensor<8x8xf32>
  %0 = fuel.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %1 = fuel.softmax %0 axis = -1 : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}

// A 1024^3 matmul is worth its copies: the Triton kernel on cuda:0 wins (ties with cuda:1 go
// to the first device), its runner-ups are the other Triton tile configs.
// CHECK-LABEL: func.func @big_matmul
// CHECK-NEXT:    %{{.*}} = fuel.weight
// CHECK-NEXT:    %{{.*}} = fuel.matmul {{.*}}{fuel.device = #fuel.device<"cuda:0">, fuel.alternatives = [#fuel.candidate<"triton", backend "cuda", device "cuda:0", rev "{{[0-9a-f]+}}", l1 = {{[0-9.e+]+}}, judge = none, xfer = {{[0-9.e+]+}}, verdict "winner">
func.func @big_matmul(%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %w = fuel.weight "w" : tensor<1024x1024xf32>
  %0 = fuel.matmul %x, %w : tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  func.return %0 : tensor<1024x1024xf32>
}

// A pinned op keeps its pin and is placed on the pinned device; views get no decision.
// CHECK-LABEL: func.func @softmax_matmul_not_applied
// CHECK-NEXT:    %[[R:.*]] = fuel.reshape %{{.*}} : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT:    %{{.*}} = fuel.neg %[[R]] {fuel.pin = #fuel.device<"cpu">, fuel.device = #fuel.device<"cpu">, fuel.alternatives = [#fuel.candidate<{{.*}}device "cpu"{{.*}}verdict "winner">]} : tensor<32xf32>
func.func @softmax_matmul_not_applied(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %r = fuel.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %n = fuel.neg %r {fuel.pin = #fuel.device<"cpu">} : tensor<32xf32>
  func.return %n : tensor<32xf32>
}
