builtin.module attributes {fuel.weights = "decoder_block.safetensors"} {
  func.func @main(%x: tensor<1x16x64xf32> {fuel.name = "x"}) -> (tensor<1x16x64xf32> {fuel.name = "y"}) {
    %rope_cos = fuel.weight "rope.cos" : tensor<16x8xf32>
    %rope_sin = fuel.weight "rope.sin" : tensor<16x8xf32>
    %attn_norm = fuel.weight "attn_norm" : tensor<64xf32>
    %0 = fuel.rms_norm %x, %attn_norm eps = 1.000000e-06 : tensor<1x16x64xf32>, tensor<64xf32> -> tensor<1x16x64xf32>
    %wq = fuel.weight "wq" : tensor<64x64xf32>
    %1 = fuel.matmul %0, %wq : tensor<1x16x64xf32>, tensor<64x64xf32> -> tensor<1x16x64xf32>
    %2 = fuel.reshape %1 : tensor<1x16x64xf32> -> tensor<1x16x4x16xf32>
    %3 = fuel.transpose %2 perm = [0, 2, 1, 3] : tensor<1x16x4x16xf32> -> tensor<1x4x16x16xf32>
    %wk = fuel.weight "wk" : tensor<64x32xf32>
    %4 = fuel.matmul %0, %wk : tensor<1x16x64xf32>, tensor<64x32xf32> -> tensor<1x16x32xf32>
    %5 = fuel.reshape %4 : tensor<1x16x32xf32> -> tensor<1x16x2x16xf32>
    %6 = fuel.transpose %5 perm = [0, 2, 1, 3] : tensor<1x16x2x16xf32> -> tensor<1x2x16x16xf32>
    %wv = fuel.weight "wv" : tensor<64x32xf32>
    %7 = fuel.matmul %0, %wv : tensor<1x16x64xf32>, tensor<64x32xf32> -> tensor<1x16x32xf32>
    %8 = fuel.reshape %7 : tensor<1x16x32xf32> -> tensor<1x16x2x16xf32>
    %9 = fuel.transpose %8 perm = [0, 2, 1, 3] : tensor<1x16x2x16xf32> -> tensor<1x2x16x16xf32>
    %10 = fuel.rope %3, %rope_cos, %rope_sin : tensor<1x4x16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32> -> tensor<1x4x16x16xf32>
    %11 = fuel.rope %6, %rope_cos, %rope_sin : tensor<1x2x16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32> -> tensor<1x2x16x16xf32>
    %12 = fuel.attention %10, %11, %9 causal scale = 2.500000e-01 : tensor<1x4x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32> -> tensor<1x4x16x16xf32>
    %13 = fuel.transpose %12 perm = [0, 2, 1, 3] : tensor<1x4x16x16xf32> -> tensor<1x16x4x16xf32>
    %14 = fuel.reshape %13 : tensor<1x16x4x16xf32> -> tensor<1x16x64xf32>
    %wo = fuel.weight "wo" : tensor<64x64xf32>
    %15 = fuel.matmul %14, %wo : tensor<1x16x64xf32>, tensor<64x64xf32> -> tensor<1x16x64xf32>
    %16 = fuel.add %x, %15 : tensor<1x16x64xf32>, tensor<1x16x64xf32> -> tensor<1x16x64xf32>
    %ffn_norm = fuel.weight "ffn_norm" : tensor<64xf32>
    %17 = fuel.rms_norm %16, %ffn_norm eps = 1.000000e-06 : tensor<1x16x64xf32>, tensor<64xf32> -> tensor<1x16x64xf32>
    %w_gate = fuel.weight "w_gate" : tensor<64x128xf32>
    %18 = fuel.matmul %17, %w_gate : tensor<1x16x64xf32>, tensor<64x128xf32> -> tensor<1x16x128xf32>
    %19 = fuel.silu %18 : tensor<1x16x128xf32>
    %w_up = fuel.weight "w_up" : tensor<64x128xf32>
    %20 = fuel.matmul %17, %w_up : tensor<1x16x64xf32>, tensor<64x128xf32> -> tensor<1x16x128xf32>
    %21 = fuel.mul %19, %20 : tensor<1x16x128xf32>, tensor<1x16x128xf32> -> tensor<1x16x128xf32>
    %w_down = fuel.weight "w_down" : tensor<128x64xf32>
    %22 = fuel.matmul %21, %w_down : tensor<1x16x128xf32>, tensor<128x64xf32> -> tensor<1x16x64xf32>
    %23 = fuel.add %16, %22 : tensor<1x16x64xf32>, tensor<1x16x64xf32> -> tensor<1x16x64xf32>
    func.return %23 : tensor<1x16x64xf32>
  }
}
