// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// CHECK-LABEL: func.func @stamped
// CHECK-NEXT:    %{{.*}} = fuel.exp %{{.*}} {fuel.device = #fuel.device<"cuda:0">, fuel.kernel = #fuel.kernel<"exp", [f32, f32], "cuda", "triton", "00000000deadbeef">} : tensor<4xf32>
// CHECK-NEXT:    %{{.*}} = fuel.neg %{{.*}} {fuel.precision = #fuel.precision<bit_stable, ulp = 0>, p2 = #fuel.precision<rel = 1.0e-05, abs = 0.5>, p3 = #fuel.precision<unaudited>, p4 = #fuel.precision<none>, b = #fuel.backend<"cpu">} : tensor<4xf32>
func.func @stamped(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fuel.exp %x {fuel.device = #fuel.device<"cuda:0">, fuel.kernel = #fuel.kernel<"exp", [f32, f32], "cuda", "triton", "00000000deadbeef">} : tensor<4xf32>
  %z = fuel.neg %y {fuel.precision = #fuel.precision<ulp = 0, bit_stable>, p2 = #fuel.precision<rel = 1.0e-05, abs = 0.5>, p3 = #fuel.precision<unaudited>, p4 = #fuel.precision<none>, b = #fuel.backend<"cpu">} : tensor<4xf32>
  func.return %z : tensor<4xf32>
}
