// RUN: fuel-opt %s -p 'fuel-select{judge="none"}' | filecheck %s
// RUN: fuel-opt %s -p 'fuel-select{judge="none" precision="ulp=1"}' | filecheck %s --check-prefix=FAITHFUL
// RUN: not fuel-opt %s -p 'fuel-select{judge="none" precision="ulp=0"}' 2>&1 | filecheck %s --check-prefix=NONE

// The winner is stamped as the kernel the executor will run.
// CHECK-LABEL: func.func @exp_chain
// CHECK-NEXT:    %[[A:.*]] = fuel.exp %{{.*}} {fuel.device = #fuel.device<"cpu">, fuel.kernel = #fuel.kernel<"exp", [f32, f32], "cpu", "[[SRC:[a-z0-9-]+]]", "{{[0-9a-f]+}}">, fuel.alternatives = [#fuel.candidate<"[[SRC]]", backend "cpu"{{.*}}verdict "winner">
// CHECK-NEXT:    %{{.*}} = fuel.tanh %[[A]] {fuel.device = #fuel.device<"cpu">, fuel.kernel = #fuel.kernel<"tanh", [f32, f32], "cpu",
// FAITHFUL-LABEL: func.func @exp_chain
// FAITHFUL-NEXT:    fuel.exp {{.*}}fuel.kernel = #fuel.kernel<"exp", [f32, f32], "cpu", "numpy",
// NONE: precision-floor rejected every candidate for op=exp dtypes=(f32, f32)
func.func @exp_chain(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = fuel.exp %x : tensor<16xf32>
  %1 = fuel.tanh %0 : tensor<16xf32>
  func.return %1 : tensor<16xf32>
}

// On a single-device machine no copies are inserted; movement-only code is left alone.
// CHECK-LABEL: func.func @exp_chain_not_applied
// CHECK-NEXT:    %[[R:.*]] = fuel.reshape %{{.*}} : tensor<16xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<4x4xf32>
func.func @exp_chain_not_applied(%x: tensor<16xf32>) -> tensor<4x4xf32> {
  %r = fuel.reshape %x : tensor<16xf32> -> tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}
