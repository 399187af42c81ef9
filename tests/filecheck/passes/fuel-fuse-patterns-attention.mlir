// The exporter forms of attention (passes/fused/attention_forms.py): each fused, and a sibling
// that is not.
// RUN: fuel-opt %s -p fuel-fuse-patterns | filecheck %s
// RUN: fuel-opt %s -p fuel-fuse-patterns,fuel-fuse-patterns | filecheck %s

// torch's SDPA decomposition: sqrt(scale) on q and on kᵀ, an additive mask, the NaN guard.
// CHECK-LABEL: func.func @attention_sdpa_export
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x3x4xf32>, %[[K:.*]]: tensor<1x2x3x4xf32>, %[[V:.*]]: tensor<1x2x3x4xf32>, %[[M:.*]]: tensor<1x1x3x3xf32>)
// CHECK:         } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<1x1x3x3xf32>) scale = 2.500000e-01 {fuel.fused = "attention"}
// CHECK-NEXT:      fuel.yield %[[F]]
func.func @attention_sdpa_export(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>, %mask: tensor<1x1x3x3xf32>) -> tensor<1x2x3x4xf32> {
  %c = fuel.constant dense<5.000000e-01> : tensor<f32>
  %zero = fuel.constant dense<0.000000e+00> : tensor<1xf32>
  %kt = fuel.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %qs = fuel.mul %q, %c : tensor<1x2x3x4xf32>, tensor<f32> -> tensor<1x2x3x4xf32>
  %ks = fuel.mul %kt, %c : tensor<1x2x4x3xf32>, tensor<f32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %qs, %ks : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %m = fuel.add %s, %mask : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %m axis = 3 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %nan = fuel.ne %p, %p : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xi1>
  %g = fuel.where %nan, %zero, %p : tensor<1x2x3x3xi1>, tensor<1xf32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %g, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// The same without the guard: a mask that may hold -inf could leave a row all -inf, which
// softmax makes NaN and the kernel zeros.
// CHECK-LABEL: func.func @attention_unguarded_mask_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @attention_unguarded_mask_not_applied(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>, %mask: tensor<1x1x3x3xf32>) -> tensor<1x2x3x4xf32> {
  %kt = fuel.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %m = fuel.add %s, %mask : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %m axis = 3 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// GPT-2/BERT: kᵀ is the (B, S, H, D) projection permuted (0, 2, 3, 1), the scale a div, a
// boolean mask selects a large negative: k is built as its (0, 2, 1, 3) transpose and the mask
// as where(b, 0, fill).
// CHECK-LABEL: func.func @attention_gpt2_export
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x3x4xf32>, %[[X:.*]]: tensor<1x3x2x4xf32>, %[[V:.*]]: tensor<1x2x3x4xf32>, %[[B:.*]]: tensor<1x1x3x3xi1>)
// CHECK:         } arm {
// CHECK-NEXT:      %[[K:.*]] = fuel.transpose %[[X]] perm = [0, 2, 1, 3] : tensor<1x3x2x4xf32> -> tensor<1x2x3x4xf32>
// CHECK-NEXT:      %[[Z:.*]] = fuel.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[L:.*]] = fuel.constant dense<-3.40282347e+38> : tensor<f32>
// CHECK-NEXT:      %[[M:.*]] = fuel.where %[[B]], %[[Z]], %[[L]]
// CHECK-NEXT:      %[[F:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<1x1x3x3xf32>) scale = 5.000000e-01 {fuel.fused = "attention"}
func.func @attention_gpt2_export(%q: tensor<1x2x3x4xf32>, %x: tensor<1x3x2x4xf32>, %v: tensor<1x2x3x4xf32>, %b: tensor<1x1x3x3xi1>) -> tensor<1x2x3x4xf32> {
  %c = fuel.constant dense<2.000000e+00> : tensor<f32>
  %low = fuel.constant dense<-3.40282347e+38> : tensor<f32>
  %kt = fuel.transpose %x perm = [0, 2, 3, 1] : tensor<1x3x2x4xf32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %t = fuel.div %s, %c : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %m = fuel.where %b, %t, %low : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %m axis = 3 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// A scale that is not a scalar (per-key weights) is not attention's scale.
// CHECK-LABEL: func.func @attention_tensor_scale_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @attention_tensor_scale_not_applied(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>, %w: tensor<1x1x1x3xf32>) -> tensor<1x2x3x4xf32> {
  %kt = fuel.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %t = fuel.mul %s, %w : tensor<1x2x3x3xf32>, tensor<1x1x1x3xf32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %t axis = 3 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// T5: no scale, a finite additive bias selected by a where (no -inf, so no guard needed).
// CHECK-LABEL: func.func @attention_t5_export
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x3x4xf32>, %[[K:.*]]: tensor<1x2x3x4xf32>, %[[V:.*]]: tensor<1x2x3x4xf32>, %[[B:.*]]: tensor<1x1x3x3xi1>)
// CHECK:         %[[M:.*]] = fuel.where %[[B]]
// CHECK:         } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<1x2x3x3xf32>) scale = 1.000000e+00 {fuel.fused = "attention"}
func.func @attention_t5_export(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>, %b: tensor<1x1x3x3xi1>) -> tensor<1x2x3x4xf32> {
  %bias = fuel.constant dense<0.5> : tensor<1x2x3x3xf32>
  %low = fuel.constant dense<-3.40282347e+38> : tensor<f32>
  %mask = fuel.where %b, %bias, %low : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %kt = fuel.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %m = fuel.add %s, %mask : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %m axis = 3 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// A "mask" computed from the scores themselves is no mask; softmax over the wrong axis is
// no attention.
// CHECK-LABEL: func.func @attention_score_mask_and_axis_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @attention_score_mask_and_axis_not_applied(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) {
  %kt = fuel.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %n = fuel.neg %s : tensor<1x2x3x3xf32>
  %m = fuel.add %s, %n : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %m axis = 3 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  %kt2 = fuel.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %s2 = fuel.matmul %q, %kt2 : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %p2 = fuel.softmax %s2 axis = 2 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o2 = fuel.matmul %p2, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o, %o2 : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>
}

// torch.onnx dynamo: kᵀ through (B*H, S, D), a 3-d transpose and back; the scale constant
// shared by both sides.
// CHECK-LABEL: func.func @attention_dynamo_export
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x3x4xf32>, %[[K:.*]]: tensor<1x2x3x4xf32>, %[[V:.*]]: tensor<1x2x3x4xf32>)
// CHECK:         } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] scale = 2.500000e-01 {fuel.fused = "attention"}
func.func @attention_dynamo_export(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %c = fuel.constant dense<5.000000e-01> : tensor<f32>
  %r = fuel.reshape %k : tensor<1x2x3x4xf32> -> tensor<2x3x4xf32>
  %t = fuel.transpose %r perm = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %kt = fuel.reshape %t : tensor<2x4x3xf32> -> tensor<1x2x4x3xf32>
  %qs = fuel.mul %q, %c : tensor<1x2x3x4xf32>, tensor<f32> -> tensor<1x2x3x4xf32>
  %ks = fuel.mul %kt, %c : tensor<1x2x4x3xf32>, tensor<f32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %qs, %ks : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %s axis = 3 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// A reshape that reinterprets k (B*H, S, D) as (B*H, D, S) without a transpose is no kᵀ.
// CHECK-LABEL: func.func @attention_dynamo_export_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @attention_dynamo_export_not_applied(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %r = fuel.reshape %k : tensor<1x2x3x4xf32> -> tensor<2x3x4xf32>
  %t = fuel.reshape %r : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %kt = fuel.reshape %t : tensor<2x4x3xf32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %s axis = 3 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}
