// RUN: fuel-opt %s -p 'fuel-optimize{judge="none"}' | filecheck %s
// RUN: fuel-opt %s -p 'fuel-optimize{judge="none" topology="%S/Inputs/host_and_accel.toml"}' | filecheck %s --check-prefix=ACCEL

// On the host: every decision point stamped with its winner, no branch, no copy.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %[[A:.*]] = fuel.exp %{{.*}} {fuel.device = #fuel.device<"cpu">, fuel.kernel = #fuel.kernel<"exp", [f32, f32], "cpu", {{.*}}fuel.alternatives = [
// CHECK-NEXT:    %[[B:.*]] = fuel.tanh %[[A]] {fuel.device = #fuel.device<"cpu">, fuel.kernel = #fuel.kernel<"tanh"
// CHECK-NEXT:    func.return %[[B]] : tensor<4096x4096xf32>
// With an accelerator the runner-up is offered as a placement branch for the runtime picker.
// ACCEL-LABEL: func.func @chain
// ACCEL-NEXT:    %{{.*}} = fuel.branch placement -> tensor<4096x4096xf32> arm {
// ACCEL-NEXT:      fuel.exp {{.*}}fuel.device = #fuel.device<"cpu">
// ACCEL:         } arm {
// ACCEL-NEXT:      fuel.copy %{{.*}} to "cuda:0"
func.func @chain(%x: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %0 = fuel.exp %x : tensor<4096x4096xf32>
  %1 = fuel.tanh %0 : tensor<4096x4096xf32>
  func.return %1 : tensor<4096x4096xf32>
}

// Movement-only code has no decision point: nothing to stamp, fork or copy.
// CHECK-LABEL: func.func @chain_not_applied
// CHECK-NEXT:    %[[R:.*]] = fuel.reshape %{{.*}} : tensor<16xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<4x4xf32>
func.func @chain_not_applied(%x: tensor<16xf32>) -> tensor<4x4xf32> {
  %r = fuel.reshape %x : tensor<16xf32> -> tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}
