// RUN: fuel-opt %s -p convert-fuel-to-c | filecheck %s
// RUN: fuel-opt %s -p convert-fuel-to-c,convert-fuel-to-c | filecheck %s

// An f32 transcendental stamped with its c-vecmath sibling computes with the vectorizable C
// function (AVX2 clone of the loop); the kernel body keeps that stamp, so the source
// regenerates from it. (lit runs with FUEL_NATIVE=0: nothing is registered to replace the
// numpy stamps, tests/test_cpu_vecmath.py covers that.)
// CHECK:      fuel.c_kernel @c_fused_0 space = [16] : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> source = "{{.*}}#pragma GCC optimize{{.*}}fuel_vm_tanh(double x){{.*}}FUEL_VM_CLONES static void c_fused_0_body{{.*}}float v3 = (float)fuel_vm_tanh((double)v2);  /* fuel.tanh */{{.*}}"
// CHECK-NEXT:   ^bb0(%[[X:.*]]: tensor<16xf32>, %[[C:.*]]: tensor<16xf32>):
// CHECK-NEXT:     %[[M:.*]] = fuel.mul %[[X]], %[[C]] : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
// CHECK-NEXT:     %[[T:.*]] = fuel.tanh %[[M]] {fuel.kernel = #fuel.kernel<"tanh", [f32, f32], "cpu", "c-vecmath", "00000000000000bb">} : tensor<16xf32>
// CHECK-NEXT:     fuel.yield %[[T]] : tensor<16xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: fuel.c_kernel @c_fused_1 space = [16] : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> source = "{{.*}}float v3 = (float)tanh((double)v2);  /* fuel.tanh */{{.*}}"
// CHECK-NEXT:   ^bb0(%[[X2:.*]]: tensor<16xf32>, %[[C2:.*]]: tensor<16xf32>):
// CHECK-NEXT:     %[[M2:.*]] = fuel.mul %[[X2]], %[[C2]] : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
// CHECK-NEXT:     %[[T2:.*]] = fuel.tanh %[[M2]] : tensor<16xf32>

// CHECK-LABEL: func.func @vecmath_tanh
// CHECK-SAME:    (%[[X:.*]]: tensor<16xf32>, %[[C:.*]]: tensor<16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.c_launch @c_fused_0(%[[X]], %[[C]]) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @vecmath_tanh(%x: tensor<16xf32>, %c: tensor<16xf32>) -> tensor<16xf32> {
  %m = fuel.mul %x, %c : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %t = fuel.tanh %m {fuel.kernel = #fuel.kernel<"tanh", [f32, f32], "cpu", "c-vecmath", "00000000000000bb">} : tensor<16xf32>
  func.return %t : tensor<16xf32>
}

// Stamped with the numpy kernel (and nothing registered to replace it): numpy's own C.
// CHECK-LABEL: func.func @vecmath_tanh_not_applied
// CHECK-NEXT:    fuel.c_launch @c_fused_1
// CHECK-NEXT:    func.return
func.func @vecmath_tanh_not_applied(%x: tensor<16xf32>, %c: tensor<16xf32>) -> tensor<16xf32> {
  %m = fuel.mul %x, %c : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %t = fuel.tanh %m {fuel.kernel = #fuel.kernel<"tanh", [f32, f32], "cpu", "numpy", "00000000000000aa">} : tensor<16xf32>
  func.return %t : tensor<16xf32>
}

// A lone op stamped c-vecmath becomes a kernel of its own (no library kernel to fall back on
// where the bundle runs without a compiler).
// CHECK-LABEL: func.func @vecmath_lone_op
// CHECK-NEXT:    fuel.c_launch
// CHECK-NEXT:    func.return
func.func @vecmath_lone_op(%x: tensor<16xf32>) -> tensor<16xf32> {
  %t = fuel.exp %x {fuel.kernel = #fuel.kernel<"exp", [f32, f32], "cpu", "c-vecmath", "00000000000000bb">} : tensor<16xf32>
  func.return %t : tensor<16xf32>
}
