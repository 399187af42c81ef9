// RUN: fuel-opt %s -p 'fuel-fork-placements{judge="none" topology="%S/Inputs/host_and_accel.toml"}' | filecheck %s
// RUN: fuel-opt %s -p 'fuel-fork-placements{judge="none"}' | filecheck %s --check-prefix=CPU

// The runner-up on the accelerator becomes arm 1: its input copied in, its result copied back.
// CHECK-LABEL: func.func @fork
// CHECK-NEXT:    %[[B:.*]] = fuel.branch placement -> tensor<4096x4096xf32> arm {
// CHECK-NEXT:      %[[A:.*]] = fuel.exp %{{.*}} {fuel.device = #fuel.device<"cpu">, fuel.kernel = #fuel.kernel<"exp"
// CHECK-NEXT:      fuel.yield %[[A]] : tensor<4096x4096xf32>
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[IN:.*]] = fuel.copy %{{.*}} to "cuda:0" : tensor<4096x4096xf32>
// CHECK-NEXT:      %[[R:.*]] = fuel.exp %[[IN]] {fuel.device = #fuel.device<"cuda:0">, fuel.kernel = #fuel.kernel<"exp"
// CHECK-NEXT:      %[[OUT:.*]] = fuel.copy %[[R]] to "cpu" : tensor<4096x4096xf32>
// CHECK-NEXT:      fuel.yield %[[OUT]] : tensor<4096x4096xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[B]] : tensor<4096x4096xf32>
// On the host alone there is no other device, so no branch.
// CPU-LABEL: func.func @fork
// CPU-NEXT:    %{{.*}} = fuel.exp
// CPU-NOT:     fuel.branch
func.func @fork(%x: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %0 = fuel.exp %x : tensor<4096x4096xf32>
  func.return %0 : tensor<4096x4096xf32>
}

// A value with two consumers has no single reconverge point: not forked.
// CHECK-LABEL: func.func @fork_not_applied
// CHECK-NEXT:    %[[A:.*]] = fuel.exp %{{.*}} : tensor<4096x4096xf32>
// CHECK-NEXT:    func.return %[[A]], %[[A]] : tensor<4096x4096xf32>, tensor<4096x4096xf32>
func.func @fork_not_applied(%x: tensor<4096x4096xf32>) -> (tensor<4096x4096xf32>, tensor<4096x4096xf32>) {
  %0 = fuel.exp %x : tensor<4096x4096xf32>
  func.return %0, %0 : tensor<4096x4096xf32>, tensor<4096x4096xf32>
}
