// RUN: fuel-opt %s -p 'fuel-optimize{judge="none"}' | filecheck %s
// RUN: fuel-opt %s -p 'fuel-optimize{judge="none" topology="%S/Inputs/host_and_accel.toml"}' | filecheck %s --check-prefix=ACCEL
// RUN: fuel-opt %S/Inputs/optimize_budget.mlir -p 'fuel-optimize{judge="none" topology="%S/Inputs/host_and_accel.toml" budget="cuda:0=3KiB"}' | filecheck %s --check-prefix=BUDGET
// RUN: not fuel-opt %S/Inputs/optimize_budget.mlir -p 'fuel-optimize{judge="none" topology="%S/Inputs/host_and_accel.toml" budget="cuda:0=1.5KiB"}' 2>&1 | filecheck %s --check-prefix=UNREACHABLE
// RUN: not fuel-opt %s -p 'fuel-optimize{judge="none" budget="cuda:5=1GiB"}' 2>&1 | filecheck %s --check-prefix=UNKNOWN

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

// A KV-cache row write: the donated cache stays donated, the write is stamped on the host
// (the executor runs it in the caller's buffer: runtime/in_place.py).
// CHECK-LABEL: func.func @cache_write
// CHECK-SAME:    (%[[C:.*]]: tensor<2x1x2x64x8xf32> {fuel.name = "cache", fuel.donate}, %[[K:.*]]: tensor<1x1x2x1x8xf32>, %[[P:.*]]: tensor<1xi64>)
// CHECK-NEXT:    %[[W:.*]] = fuel.index_copy %[[C]], %[[K]], %[[P]] axis = 3 offsets = [1, 0, 0, 0, 0] {fuel.device = #fuel.device<"cpu">, fuel.kernel = #fuel.kernel<"index_copy", [f32, f32, i64, f32], "cpu"
// CHECK-NEXT:    func.return %[[W]]
func.func @cache_write(%c: tensor<2x1x2x64x8xf32> {fuel.name = "cache", fuel.donate}, %k: tensor<1x1x2x1x8xf32>, %p: tensor<1xi64>) -> tensor<2x1x2x64x8xf32> {
  %0 = fuel.index_copy %c, %k, %p axis = 3 offsets = [1, 0, 0, 0, 0] : tensor<2x1x2x64x8xf32>, tensor<1x1x2x1x8xf32>, tensor<1xi64> -> tensor<2x1x2x64x8xf32>
  func.return %0 : tensor<2x1x2x64x8xf32>
}

// With a budget, residency copies come after the placement copies: the BUDGET runs optimize
// Inputs/optimize_budget.mlir (ops pinned to cuda:0, which the host-only runs above lack).
// %a is idle from %b to %e: evicted to the host after its last read, reloaded for %e.
// BUDGET-LABEL: func.func @evict_idle
// BUDGET-NEXT:    %[[X:.*]] = fuel.copy %{{.*}} to "cuda:0" : tensor<256xf32>
// BUDGET-NEXT:    %[[A:.*]] = fuel.exp %[[X]] {{.*}}fuel.device = #fuel.device<"cuda:0">
// BUDGET-NEXT:    %[[B:.*]] = fuel.tanh %[[A]]
// BUDGET-NEXT:    %[[H:.*]] = fuel.copy %[[A]] to "cpu" {fuel.residency = "evict"}
// BUDGET-NEXT:    %[[C:.*]] = fuel.neg %[[B]]
// BUDGET-NEXT:    %[[D:.*]] = fuel.add %[[B]], %[[C]]
// BUDGET-NEXT:    %[[R:.*]] = fuel.copy %[[H]] to "cuda:0" {fuel.residency = "reload"}
// BUDGET-NEXT:    %[[E:.*]] = fuel.add %[[R]], %[[D]]
// BUDGET-NEXT:    %[[Y:.*]] = fuel.copy %[[E]] to "cpu" : tensor<256xf32>
// BUDGET-NEXT:    func.return %[[Y]]
// A peak of 2 KiB already fits: no residency copy.
// BUDGET-LABEL: func.func @evict_idle_not_applied
// BUDGET-NEXT:    %[[X:.*]] = fuel.copy %{{.*}} to "cuda:0"
// BUDGET-NEXT:    %[[A:.*]] = fuel.exp %[[X]]
// BUDGET-NEXT:    %[[B:.*]] = fuel.tanh %[[A]]
// BUDGET-NEXT:    %[[Y:.*]] = fuel.copy %[[B]] to "cpu" : tensor<256xf32>
// BUDGET-NEXT:    func.return %[[Y]]
// UNREACHABLE: error: residency: a budget is unreachable
// UNREACHABLE: @evict_idle on cuda:0: budget 1.5 KiB; peak 4 KiB at fuel.add %d -> 3 KiB at fuel.add %d; DOES NOT FIT
// UNKNOWN: error: budget: unknown device 'cuda:5' (devices: cpu)
