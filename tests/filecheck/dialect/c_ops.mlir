// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// CHECK:      fuel.c_kernel @fused_0 space = [4, 8] : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>) source = "void fused_0(void **args) {\0A}\0A"
fuel.c_kernel @fused_0 space = [4, 8] : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>) source = "void fused_0(void **args) {\n}\n"

// A launch of a kernel symbol on the host, beside an op that stays a library kernel.
// CHECK-LABEL: func.func @lowered
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[W:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[Y:.*]], %[[M:.*]] = fuel.c_launch @fused_0(%[[X]], %[[B]]) {fuel.device = #fuel.device<"cpu">} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
// CHECK-NEXT:    %[[Z:.*]] = fuel.matmul %[[Y]], %[[W]] : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    func.return %[[Z]], %[[M]]
func.func @lowered(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x8xi1>) {
  %y:2 = fuel.c_launch @fused_0(%x, %b) {fuel.device = #fuel.device<"cpu">} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  %z = fuel.matmul %y#0, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  func.return %z, %y#1 : tensor<4x16xf32>, tensor<4x8xi1>
}
