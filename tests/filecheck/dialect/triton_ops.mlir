// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// CHECK:      fuel.triton_kernel @fused_0 space = [4, 8] block = 1024 : (tensor<4x8xf16>, tensor<8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi1>) source = "def fused_0(in0, in1, out0, out1, N, BLOCK):\0A    pass\0A"
fuel.triton_kernel @fused_0 space = [4, 8] block = 1024 : (tensor<4x8xf16>, tensor<8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi1>) source = "def fused_0(in0, in1, out0, out1, N, BLOCK):\n    pass\n"

// A launch of a kernel symbol and library calls naming binding-table keys, with op params.
// CHECK-LABEL: func.func @lowered
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf16>, %[[B:.*]]: tensor<8xf16>, %[[W:.*]]: tensor<8x16xf16>)
// CHECK-NEXT:    %[[Y:.*]], %[[M:.*]] = fuel.triton_launch @fused_0(%[[X]], %[[B]]) {fuel.device = #fuel.device<"cuda:0">} : (tensor<4x8xf16>, tensor<8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi1>)
// CHECK-NEXT:    %[[Z:.*]] = fuel.library_call "matmul" [f16, f16, f16] on "cuda"(%[[Y]], %[[W]]) : (tensor<4x8xf16>, tensor<8x16xf16>) -> tensor<4x16xf16>
// CHECK-NEXT:    %[[S:.*]] = fuel.library_call "reduce_sum" [f16, f16] on "cuda"(%[[Z]]) params {axes = array<i64: 1>, keepdim = true} : (tensor<4x16xf16>) -> tensor<4x1xf16>
// CHECK-NEXT:    func.return %[[S]], %[[M]]
func.func @lowered(%x: tensor<4x8xf16>, %b: tensor<8xf16>, %w: tensor<8x16xf16>) -> (tensor<4x1xf16>, tensor<4x8xi1>) {
  %y:2 = fuel.triton_launch @fused_0(%x, %b) {fuel.device = #fuel.device<"cuda:0">} : (tensor<4x8xf16>, tensor<8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi1>)
  %z = fuel.library_call "matmul" [f16, f16, f16] on "cuda" (%y#0, %w) : (tensor<4x8xf16>, tensor<8x16xf16>) -> tensor<4x16xf16>
  %s = fuel.library_call "reduce_sum" [f16, f16] on "cuda" (%z) params {axes = array<i64: 1>, keepdim = true} : (tensor<4x16xf16>) -> tensor<4x1xf16>
  func.return %s, %y#1 : tensor<4x1xf16>, tensor<4x8xi1>
}
