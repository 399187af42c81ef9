// RUN: fuel-opt %s -p 'fuel-emit-decode-flash{judge="none"}' | filecheck %s
// RUN: printf '[[devices]]\nname = "cpu"\nbackends = ["nocpu"]\n' > %t.toml
// RUN: fuel-opt %s -p 'fuel-emit-decode-flash{judge="none" topology="%t.toml"}' | filecheck %s --check-prefix=NOKERNEL

// One query over a KV cache with a live length: arm 0 the reference (the key's default sibling: numpy, or torch-blas where torch is installed), arm 1 flash decoding.
// CHECK-LABEL: func.func @decode
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x8x1x64xf32>, %[[K:.*]]: tensor<1x2x4096x64xf32>, %[[V:.*]]: tensor<1x2x4096x64xf32>, %[[N:.*]]: tensor<i64>)
// CHECK-NEXT:    %[[O:.*]] = fuel.branch variant (%[[Q]], %[[N]] : tensor<1x8x1x64xf32>, tensor<i64>) -> tensor<1x8x1x64xf32> arm {
// CHECK-NEXT:      %[[A:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] kv_len(%[[N]] : tensor<i64>) causal scale = 1.250000e-01 {fuel.kernel = #fuel.kernel<"attention", [f32, f32, f32, i64, f32], "cpu", "{{numpy|torch-blas}}", "{{.*}}">, fuel.device = #fuel.device<"cpu">}
// CHECK-NEXT:      fuel.yield %[[A]] : tensor<1x8x1x64xf32>
// CHECK-NEXT:    } arm if "dim($0, 2) == 1 && value($1) <= 4096" {
// CHECK-NEXT:      %[[F:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] kv_len(%[[N]] : tensor<i64>) causal scale = 1.250000e-01 {fuel.kernel = #fuel.kernel<"attention", [f32, f32, f32, i64, f32], "cpu", "numpy-flashdecode", "{{.*}}">, fuel.device = #fuel.device<"cpu">}
// CHECK-NEXT:      fuel.yield %[[F]] : tensor<1x8x1x64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[O]] : tensor<1x8x1x64xf32>
// NOKERNEL-LABEL: func.func @decode
// NOKERNEL-NEXT:    fuel.attention
// NOKERNEL-NEXT:    func.return
func.func @decode(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x4096x64xf32>, %v: tensor<1x2x4096x64xf32>, %n: tensor<i64>) -> tensor<1x8x1x64xf32> {
  %o = fuel.attention %q, %k, %v kv_len(%n : tensor<i64>) causal scale = 0.125 : tensor<1x8x1x64xf32>, tensor<1x2x4096x64xf32>, tensor<1x2x4096x64xf32> -> tensor<1x8x1x64xf32>
  func.return %o : tensor<1x8x1x64xf32>
}

// Without kv_len the gate only checks the query length.
// CHECK-LABEL: func.func @decode_full_cache
// CHECK-NEXT:    %{{.*}} = fuel.branch variant (%{{.*}} : tensor<1x4x1x32xf16>) -> tensor<1x4x1x32xf16> arm {
// CHECK:         } arm if "dim($0, 2) == 1" {
// CHECK-NEXT:      fuel.attention {{.*}}"numpy-flashdecode"
func.func @decode_full_cache(%q: tensor<1x4x1x32xf16>, %k: tensor<1x4x128x32xf16>, %v: tensor<1x4x128x32xf16>) -> tensor<1x4x1x32xf16> {
  %o = fuel.attention %q, %k, %v scale = 0.125 : tensor<1x4x1x32xf16>, tensor<1x4x128x32xf16>, tensor<1x4x128x32xf16> -> tensor<1x4x1x32xf16>
  func.return %o : tensor<1x4x1x32xf16>
}

// seq_q != 1 (a prefill): not offered.
// CHECK-LABEL: func.func @decode_seq_q_not_applied
// CHECK-NEXT:    %{{.*}} = fuel.attention
// CHECK-NEXT:    func.return
func.func @decode_seq_q_not_applied(%q: tensor<1x8x4x64xf32>, %k: tensor<1x2x4096x64xf32>, %v: tensor<1x2x4096x64xf32>) -> tensor<1x8x4x64xf32> {
  %o = fuel.attention %q, %k, %v causal scale = 0.125 : tensor<1x8x4x64xf32>, tensor<1x2x4096x64xf32>, tensor<1x2x4096x64xf32> -> tensor<1x8x4x64xf32>
  func.return %o : tensor<1x8x4x64xf32>
}

// f64: no flash kernel dtype.
// CHECK-LABEL: func.func @decode_f64_not_applied
// CHECK-NEXT:    %{{.*}} = fuel.attention
// CHECK-NEXT:    func.return
func.func @decode_f64_not_applied(%q: tensor<1x8x1x64xf64>, %k: tensor<1x2x64x64xf64>, %v: tensor<1x2x64x64xf64>) -> tensor<1x8x1x64xf64> {
  %o = fuel.attention %q, %k, %v scale = 0.125 : tensor<1x8x1x64xf64>, tensor<1x2x64x64xf64>, tensor<1x2x64x64xf64> -> tensor<1x8x1x64xf64>
  func.return %o : tensor<1x8x1x64xf64>
}

// head_dim 512 > 256: not offered.
// CHECK-LABEL: func.func @decode_head_dim_not_applied
// CHECK-NEXT:    %{{.*}} = fuel.attention
// CHECK-NEXT:    func.return
func.func @decode_head_dim_not_applied(%q: tensor<1x2x1x512xf32>, %k: tensor<1x2x64x512xf32>, %v: tensor<1x2x64x512xf32>) -> tensor<1x2x1x512xf32> {
  %o = fuel.attention %q, %k, %v scale = 0.125 : tensor<1x2x1x512xf32>, tensor<1x2x64x512xf32>, tensor<1x2x64x512xf32> -> tensor<1x2x1x512xf32>
  func.return %o : tensor<1x2x1x512xf32>
}
