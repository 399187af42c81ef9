// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// A linear layer with each activation, batched input, f16.
// CHECK-LABEL: func.func @matmul_bias_act
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>, %[[H:.*]]: tensor<2x4x8xf16>, %[[WH:.*]]: tensor<8x16xf16>, %[[BH:.*]]: tensor<16xf16>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.matmul_bias_act %[[X]], %[[W]], %[[B]] act = "relu" : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %{{.*}} = fuel.matmul_bias_act %[[X]], %[[W]], %[[B]] act = "none" : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %{{.*}} = fuel.matmul_bias_act %[[X]], %[[W]], %[[B]] act = "gelu_tanh" : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %{{.*}} = fuel.matmul_bias_act %[[H]], %[[WH]], %[[BH]] act = "silu" : tensor<2x4x8xf16>, tensor<8x16xf16>, tensor<16xf16> -> tensor<2x4x16xf16>
// CHECK-NEXT:    func.return %[[Y]] : tensor<4x16xf32>
func.func @matmul_bias_act(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %h: tensor<2x4x8xf16>, %wh: tensor<8x16xf16>, %bh: tensor<16xf16>) -> tensor<4x16xf32> {
  %0 = fuel.matmul_bias_act %x, %w, %b act = "relu" : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %1 = fuel.matmul_bias_act %x, %w, %b act = "none" : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %2 = fuel.matmul_bias_act %x, %w, %b act = "gelu_tanh" : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %3 = fuel.matmul_bias_act %h, %wh, %bh act = "silu" : tensor<2x4x8xf16>, tensor<8x16xf16>, tensor<16xf16> -> tensor<2x4x16xf16>
  func.return %0 : tensor<4x16xf32>
}

// A SiLU-gated MLP over a batched input.
// CHECK-LABEL: func.func @gated_mlp
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8x16xf32>, %[[U:.*]]: tensor<8x16xf32>, %[[D:.*]]: tensor<16x6xf32>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.gated_mlp %[[X]], %[[G]], %[[U]], %[[D]] : tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x6xf32> -> tensor<2x4x6xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x4x6xf32>
func.func @gated_mlp(%x: tensor<2x4x8xf32>, %g: tensor<8x16xf32>, %u: tensor<8x16xf32>, %d: tensor<16x6xf32>) -> tensor<2x4x6xf32> {
  %0 = fuel.gated_mlp %x, %g, %u, %d : tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x6xf32> -> tensor<2x4x6xf32>
  func.return %0 : tensor<2x4x6xf32>
}
