// RUN: fuel-opt %s -p convert-fuel-to-triton | filecheck %s
// RUN: fuel-opt %s -p convert-fuel-to-triton,convert-fuel-to-triton | filecheck %s
// RUN: fuel-opt %s -p 'convert-fuel-to-triton{placed_only=true}' | filecheck %s --check-prefix=PLACED

// One generated kernel per distinct fusion group, at the top of the module, with its source
// and, as its body, the ops it was generated from.
// CHECK:      fuel.triton_kernel @fused_0 space = [4, 8] block = 1024 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> source = "{{.*}}def fused_0(in0, in1, out0, N, BLOCK: tl.constexpr):{{.*}}tl.exp(v0){{.*}}v2 + v1{{.*}}"
// CHECK-NEXT:   ^bb0(%[[IN0:.*]]: tensor<4x8xf32>, %[[IN1:.*]]: tensor<8xf32>):
// CHECK-NEXT:     %[[E:.*]] = fuel.exp %[[IN0]] : tensor<4x8xf32>
// CHECK-NEXT:     %[[A:.*]] = fuel.add %[[E]], %[[IN1]] : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:     %[[R:.*]] = fuel.relu %[[A]] : tensor<4x8xf32>
// CHECK-NEXT:     fuel.yield %[[R]] : tensor<4x8xf32>
// CHECK-NEXT:   }
// CHECK:      fuel.triton_kernel @fused_1 space = [4, 8] block = 1024 : (tensor<8xf16>, tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi1>) source = "{{.*}}i1 = offs % 8{{.*}}tl.load(in0 + i1, mask=mask).to(tl.float32){{.*}}tl.full([BLOCK], 0.5, tl.float32){{.*}}"
// CHECK:      fuel.triton_kernel @fused_2 space = [4, 8] block = 1024 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> source = "{{.*}}def fused_2(in0, in1, out0, N, BLOCK{{.*}}"
// CHECK:      fuel.triton_kernel @fused_3 space = [4, 16] block = 1024 : (tensor<4x16xf32>) -> tensor<4x16xf32> source = "{{.*}}_x_sigmoid(v0, v0){{.*}}"
// CHECK-NOT:  fuel.triton_kernel

// With placed_only, only the ops placed on a cuda device convert.
// PLACED:     fuel.triton_kernel @fused_0 space = [4, 8]
// PLACED-NOT: fuel.triton_kernel
// PLACED-LABEL: func.func @chain
// PLACED-NEXT:    fuel.exp
// PLACED-LABEL: func.func @broadcast_chain
// PLACED-NEXT:    %{{.*}}, %{{.*}} = fuel.triton_launch @fused_0
// PLACED-LABEL: func.func @matmul_breaks_chain
// PLACED-NEXT:    fuel.add

// An elementwise chain fuses into one kernel launch.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.triton_launch @fused_0(%[[X]], %[[B]]) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = fuel.exp %x : tensor<4x8xf32>
  %a = fuel.add %e, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %r = fuel.relu %a : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// The same chain again shares the kernel.
// CHECK-LABEL: func.func @chain_again
// CHECK-NEXT:    %{{.*}} = fuel.triton_launch @fused_0(%{{.*}}, %{{.*}})
func.func @chain_again(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = fuel.exp %x : tensor<4x8xf32>
  %a = fuel.add %e, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %r = fuel.relu %a : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// A broadcast chain with a splat constant (inlined, then erased) and two outputs; the
// placement carries over to the launch.
// CHECK-LABEL: func.func @broadcast_chain
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf16>, %[[B:.*]]: tensor<8xf16>)
// CHECK-NEXT:    %[[Y:.*]], %[[C:.*]] = fuel.triton_launch @fused_1(%[[B]], %[[X]]) {fuel.device = #fuel.device<"cuda:0">} : (tensor<8xf16>, tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi1>)
// CHECK-NEXT:    func.return %[[Y]], %[[C]]
func.func @broadcast_chain(%x: tensor<4x8xf16>, %b: tensor<8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi1>) {
  %h = fuel.constant dense<0.5> : tensor<f16>
  %bb = fuel.broadcast %b {fuel.device = #fuel.device<"cuda:0">} : tensor<8xf16> -> tensor<4x8xf16>
  %m = fuel.mul %x, %bb {fuel.device = #fuel.device<"cuda:0">} : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
  %y = fuel.sub %m, %h {fuel.device = #fuel.device<"cuda:0">} : tensor<4x8xf16>, tensor<f16> -> tensor<4x8xf16>
  %c = fuel.gt %y, %x {fuel.device = #fuel.device<"cuda:0">} : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xi1>
  func.return %y, %c : tensor<4x8xf16>, tensor<4x8xi1>
}

// A matmul breaks the chain: two groups around a library call of the binding-table key.
// CHECK-LABEL: func.func @matmul_breaks_chain
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[W:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.triton_launch @fused_2(%[[X]], %[[B]])
// CHECK-NEXT:    %[[M:.*]] = fuel.library_call "matmul" [f32, f32, f32] on "cuda"(%[[A]], %[[W]]) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %[[S:.*]] = fuel.triton_launch @fused_3(%[[M]]) : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %[[R:.*]] = fuel.library_call "reduce_max" [f32, f32] on "cuda"(%[[S]]) params {axes = array<i64: 1>, keepdim = true}
// CHECK-NEXT:    func.return %[[R]]
func.func @matmul_breaks_chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<8x16xf32>) -> tensor<4x1xf32> {
  %a = fuel.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %t = fuel.tanh %a : tensor<4x8xf32>
  %m = fuel.matmul %t, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %s = fuel.silu %m : tensor<4x16xf32>
  %r = fuel.reduce_max %s axes = [1] keepdim : tensor<4x16xf32> -> tensor<4x1xf32>
  func.return %r : tensor<4x1xf32>
}

// Ops placed on the CPU stay for the CPU backend.
// CHECK-LABEL: func.func @cpu_placed_not_applied
// CHECK-NEXT:    %{{.*}} = fuel.exp %{{.*}} {fuel.device = #fuel.device<"cpu">} : tensor<2x4xf32>
// CHECK-NEXT:    %{{.*}} = fuel.matmul
// CHECK-NEXT:    func.return
func.func @cpu_placed_not_applied(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x4xf32> {
  %e = fuel.exp %x {fuel.device = #fuel.device<"cpu">} : tensor<2x4xf32>
  %m = fuel.matmul %e, %w {fuel.device = #fuel.device<"cpu">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  func.return %m : tensor<2x4xf32>
}
