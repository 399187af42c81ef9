// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// Rotary embedding, half-split (default) and interleaved; cos/sin are (S, D/2).
// CHECK-LABEL: func.func @rope
// CHECK-SAME:    (%[[X:.*]]: tensor<1x4x6x8xf32>, %[[C:.*]]: tensor<6x4xf32>, %[[S:.*]]: tensor<6x4xf32>, %[[Y:.*]]: tensor<6x16xbf16>, %[[T:.*]]: tensor<6x8xbf16>)
// CHECK-NEXT:    %[[A:.*]] = fuel.rope %[[X]], %[[C]], %[[S]] : tensor<1x4x6x8xf32>, tensor<6x4xf32>, tensor<6x4xf32> -> tensor<1x4x6x8xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.rope %[[A]], %[[C]], %[[S]] interleaved : tensor<1x4x6x8xf32>, tensor<6x4xf32>, tensor<6x4xf32> -> tensor<1x4x6x8xf32>
// CHECK-NEXT:    %{{.*}} = fuel.rope %[[Y]], %[[T]], %[[T]] interleaved : tensor<6x16xbf16>, tensor<6x8xbf16>, tensor<6x8xbf16> -> tensor<6x16xbf16>
// CHECK-NEXT:    func.return %[[B]] : tensor<1x4x6x8xf32>
func.func @rope(%x: tensor<1x4x6x8xf32>, %c: tensor<6x4xf32>, %s: tensor<6x4xf32>, %y: tensor<6x16xbf16>, %t: tensor<6x8xbf16>) -> tensor<1x4x6x8xf32> {
  %0 = fuel.rope %x, %c, %s : tensor<1x4x6x8xf32>, tensor<6x4xf32>, tensor<6x4xf32> -> tensor<1x4x6x8xf32>
  %1 = fuel.rope %0, %c, %s interleaved : tensor<1x4x6x8xf32>, tensor<6x4xf32>, tensor<6x4xf32> -> tensor<1x4x6x8xf32>
  %2 = fuel.rope %y, %t, %t interleaved : tensor<6x16xbf16>, tensor<6x8xbf16>, tensor<6x8xbf16> -> tensor<6x16xbf16>
  func.return %1 : tensor<1x4x6x8xf32>
}

// Multi-head attention (Hq == Hkv), plain and causal; v's head_dim may differ from q's.
// CHECK-LABEL: func.func @attention_mha
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x16x32xf16>, %[[K:.*]]: tensor<2x4x16x32xf16>, %[[V:.*]]: tensor<2x4x16x64xf16>)
// CHECK-NEXT:    %[[A:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] scale = 5.000000e-01 : tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>, tensor<2x4x16x64xf16> -> tensor<2x4x16x64xf16>
// CHECK-NEXT:    %[[B:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] causal scale = 1.000000e+00 : tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>, tensor<2x4x16x64xf16> -> tensor<2x4x16x64xf16>
// CHECK-NEXT:    func.return %[[B]] : tensor<2x4x16x64xf16>
func.func @attention_mha(%q: tensor<2x4x16x32xf16>, %k: tensor<2x4x16x32xf16>, %v: tensor<2x4x16x64xf16>) -> tensor<2x4x16x64xf16> {
  %0 = fuel.attention %q, %k, %v scale = 0.5 : tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>, tensor<2x4x16x64xf16> -> tensor<2x4x16x64xf16>
  %1 = fuel.attention %q, %k, %v causal scale = 1.0 : tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>, tensor<2x4x16x64xf16> -> tensor<2x4x16x64xf16>
  func.return %1 : tensor<2x4x16x64xf16>
}

// Grouped-query decode step: 8 query heads share 2 kv heads; kv_len bounds a 128-slot cache.
// CHECK-LABEL: func.func @attention_gqa_kv_cache
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x8x1x64xf32>, %[[K:.*]]: tensor<1x2x128x64xf32>, %[[V:.*]]: tensor<1x2x128x64xf32>, %[[N:.*]]: tensor<i64>)
// CHECK-NEXT:    %{{.*}} = fuel.attention %[[Q]], %[[K]], %[[V]] kv_len(%[[N]] : tensor<i64>) scale = 1.250000e-01 : tensor<1x8x1x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32> -> tensor<1x8x1x64xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] kv_len(%[[N]] : tensor<i64>) causal scale = 1.250000e-01 : tensor<1x8x1x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32> -> tensor<1x8x1x64xf32>
// CHECK-NEXT:    %{{.*}} = fuel.attention %[[Q]], %[[K]], %[[V]] causal scale = 1.250000e-01 : tensor<1x8x1x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32> -> tensor<1x8x1x64xf32>
// CHECK-NEXT:    func.return %[[B]] : tensor<1x8x1x64xf32>
func.func @attention_gqa_kv_cache(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x128x64xf32>, %v: tensor<1x2x128x64xf32>, %n: tensor<i64>) -> tensor<1x8x1x64xf32> {
  %0 = fuel.attention %q, %k, %v kv_len(%n : tensor<i64>) scale = 0.125 : tensor<1x8x1x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32> -> tensor<1x8x1x64xf32>
  %1 = fuel.attention %q, %k, %v kv_len(%n : tensor<i64>) causal scale = 0.125 : tensor<1x8x1x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32> -> tensor<1x8x1x64xf32>
  %2 = fuel.attention %q, %k, %v causal scale = 0.125 : tensor<1x8x1x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32> -> tensor<1x8x1x64xf32>
  func.return %1 : tensor<1x8x1x64xf32>
}

// Multi-query attention (one kv head) in bf16.
// CHECK-LABEL: func.func @attention_mqa
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x6x5x16xbf16>, %[[K:.*]]: tensor<2x1x7x16xbf16>, %[[V:.*]]: tensor<2x1x7x16xbf16>)
// CHECK-NEXT:    %[[A:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] causal scale = 2.500000e-01 : tensor<2x6x5x16xbf16>, tensor<2x1x7x16xbf16>, tensor<2x1x7x16xbf16> -> tensor<2x6x5x16xbf16>
// CHECK-NEXT:    func.return %[[A]] : tensor<2x6x5x16xbf16>
func.func @attention_mqa(%q: tensor<2x6x5x16xbf16>, %k: tensor<2x1x7x16xbf16>, %v: tensor<2x1x7x16xbf16>) -> tensor<2x6x5x16xbf16> {
  %0 = fuel.attention %q, %k, %v causal scale = 0.25 : tensor<2x6x5x16xbf16>, tensor<2x1x7x16xbf16>, tensor<2x1x7x16xbf16> -> tensor<2x6x5x16xbf16>
  func.return %0 : tensor<2x6x5x16xbf16>
}

// An additive mask, broadcast over batch and heads, with causal; a per-head mask on GQA.
// CHECK-LABEL: func.func @attention_mask
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x8x4x16xf32>, %[[K:.*]]: tensor<1x2x6x16xf32>, %[[M:.*]]: tensor<1x1x4x6xf32>, %[[H:.*]]: tensor<8x4x6xf32>)
// CHECK-NEXT:    %{{.*}} = fuel.attention %[[Q]], %[[K]], %[[K]] mask(%[[M]] : tensor<1x1x4x6xf32>) causal scale = 2.500000e-01 : tensor<1x8x4x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32> -> tensor<1x8x4x16xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.attention %[[Q]], %[[K]], %[[K]] mask(%[[H]] : tensor<8x4x6xf32>) scale = 1.000000e+00 : tensor<1x8x4x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32> -> tensor<1x8x4x16xf32>
// CHECK-NEXT:    func.return %[[B]] : tensor<1x8x4x16xf32>
func.func @attention_mask(%q: tensor<1x8x4x16xf32>, %k: tensor<1x2x6x16xf32>, %m: tensor<1x1x4x6xf32>, %h: tensor<8x4x6xf32>) -> tensor<1x8x4x16xf32> {
  %0 = fuel.attention %q, %k, %k mask(%m : tensor<1x1x4x6xf32>) causal scale = 0.25 : tensor<1x8x4x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32> -> tensor<1x8x4x16xf32>
  %1 = fuel.attention %q, %k, %k mask(%h : tensor<8x4x6xf32>) scale = 1.0 : tensor<1x8x4x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32> -> tensor<1x8x4x16xf32>
  func.return %1 : tensor<1x8x4x16xf32>
}
