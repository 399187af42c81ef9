// RUN: fuel-opt %s -p fuel-fuse-patterns | filecheck %s
// RUN: fuel-opt %s -p fuel-fuse-patterns,fuel-fuse-patterns | filecheck %s

// Softmax from primitives: arm 0 the primitives moved unchanged, arm 1 fuel.softmax.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.branch variant -> tensor<4x8xf32> arm {
// CHECK-NEXT:      %[[M:.*]] = fuel.reduce_max %[[X]] axes = [1] keepdim
// CHECK-NEXT:      %[[D:.*]] = fuel.sub %[[X]], %[[M]]
// CHECK-NEXT:      %[[E:.*]] = fuel.exp %[[D]]
// CHECK-NEXT:      %[[S:.*]] = fuel.reduce_sum %[[E]] axes = [-1] keepdim
// CHECK-NEXT:      %[[Q:.*]] = fuel.div %[[E]], %[[S]]
// CHECK-NEXT:      fuel.yield %[[Q]] : tensor<4x8xf32>
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.softmax %[[X]] axis = 1 {fuel.fused = "softmax"} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:      fuel.yield %[[F]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]], %[[Y]]
func.func @softmax(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = fuel.reduce_max %x axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = fuel.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = fuel.exp %d : tensor<4x8xf32>
  %s = fuel.reduce_sum %e axes = [-1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %y = fuel.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %y, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// An interior value (exp) read outside the match: not fused.
// CHECK-LABEL: func.func @softmax_extra_consumer_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @softmax_extra_consumer_not_applied(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = fuel.reduce_max %x axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = fuel.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = fuel.exp %d : tensor<4x8xf32>
  %s = fuel.reduce_sum %e axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %y = fuel.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %y, %e : tensor<4x8xf32>, tensor<4x8xf32>
}

// The max and the sum run over different axes: not a softmax.
// CHECK-LABEL: func.func @softmax_axis_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @softmax_axis_not_applied(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %m = fuel.reduce_max %x axes = [0] keepdim : tensor<8x8xf32> -> tensor<1x8xf32>
  %d = fuel.sub %x, %m : tensor<8x8xf32>, tensor<1x8xf32> -> tensor<8x8xf32>
  %e = fuel.exp %d : tensor<8x8xf32>
  %s = fuel.reduce_sum %e axes = [1] keepdim : tensor<8x8xf32> -> tensor<8x1xf32>
  %y = fuel.div %e, %s : tensor<8x8xf32>, tensor<8x1xf32> -> tensor<8x8xf32>
  func.return %y : tensor<8x8xf32>
}

// No max subtracted (a missing step): not the stable softmax fuel.softmax computes.
// CHECK-LABEL: func.func @softmax_missing_step_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @softmax_missing_step_not_applied(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = fuel.exp %x : tensor<4x8xf32>
  %s = fuel.reduce_sum %e axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %y = fuel.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// RMS norm with commuted operands; eps stays outside (arm 0 reads it), arm 1 carries it.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME:    (%[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[EPS:.*]] = fuel.constant
// CHECK-NEXT:    %[[Y:.*]] = fuel.branch variant -> tensor<2x8xf32> arm {
// CHECK-NEXT:      %[[SQ:.*]] = fuel.mul %[[X]], %[[X]]
// CHECK-NEXT:      %[[MS:.*]] = fuel.reduce_mean %[[SQ]] axes = [-1] keepdim
// CHECK-NEXT:      %[[A:.*]] = fuel.add %[[EPS]], %[[MS]]
// CHECK-NEXT:      %[[R:.*]] = fuel.rsqrt %[[A]]
// CHECK-NEXT:      %[[N:.*]] = fuel.mul %[[R]], %[[X]]
// CHECK-NEXT:      %[[O:.*]] = fuel.mul %[[W]], %[[N]]
// CHECK-NEXT:      fuel.yield %[[O]]
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.rms_norm %[[X]], %[[W]] eps = 1.000000e-06 {fuel.fused = "rms_norm"}
// CHECK-NEXT:      fuel.yield %[[F]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]]
func.func @rms_norm(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  %eps = fuel.constant dense<1.0e-06> : tensor<f32>
  %sq = fuel.mul %x, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %ms = fuel.reduce_mean %sq axes = [-1] keepdim : tensor<2x8xf32> -> tensor<2x1xf32>
  %a = fuel.add %eps, %ms : tensor<f32>, tensor<2x1xf32> -> tensor<2x1xf32>
  %r = fuel.rsqrt %a : tensor<2x1xf32>
  %n = fuel.mul %r, %x : tensor<2x1xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %y = fuel.mul %w, %n : tensor<8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// The square written as pow(x, 2) (torch.export's x.pow(2)): the same fused arm.
// CHECK-LABEL: func.func @rms_norm_pow
// CHECK:         fuel.pow
// CHECK:       } arm {
// CHECK-NEXT:      %{{.*}} = fuel.rms_norm %{{.*}}, %{{.*}} eps = 1.000000e-05 {fuel.fused = "rms_norm"}
func.func @rms_norm_pow(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  %two = fuel.constant dense<2.0> : tensor<f32>
  %eps = fuel.constant dense<1.0e-05> : tensor<f32>
  %sq = fuel.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %ms = fuel.reduce_mean %sq axes = [-1] keepdim : tensor<2x8xf32> -> tensor<2x1xf32>
  %a = fuel.add %ms, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %r = fuel.rsqrt %a : tensor<2x1xf32>
  %n = fuel.mul %x, %r : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %y = fuel.mul %n, %w : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// pow(x, 3) is not a square: nothing fused.
// CHECK-LABEL: func.func @rms_norm_pow_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @rms_norm_pow_not_applied(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  %three = fuel.constant dense<3.0> : tensor<f32>
  %eps = fuel.constant dense<1.0e-05> : tensor<f32>
  %sq = fuel.pow %x, %three : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %ms = fuel.reduce_mean %sq axes = [-1] keepdim : tensor<2x8xf32> -> tensor<2x1xf32>
  %a = fuel.add %ms, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %r = fuel.rsqrt %a : tensor<2x1xf32>
  %n = fuel.mul %x, %r : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %y = fuel.mul %n, %w : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// The mean runs over a dim other than the last: fuel.rms_norm normalises the last only.
// CHECK-LABEL: func.func @rms_norm_axis_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @rms_norm_axis_not_applied(%x: tensor<8x8xf32>, %w: tensor<8xf32>) -> tensor<8x8xf32> {
  %eps = fuel.constant dense<1.0e-06> : tensor<f32>
  %sq = fuel.mul %x, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %ms = fuel.reduce_mean %sq axes = [0] keepdim : tensor<8x8xf32> -> tensor<1x8xf32>
  %a = fuel.add %ms, %eps : tensor<1x8xf32>, tensor<f32> -> tensor<1x8xf32>
  %r = fuel.rsqrt %a : tensor<1x8xf32>
  %n = fuel.mul %x, %r : tensor<8x8xf32>, tensor<1x8xf32> -> tensor<8x8xf32>
  %y = fuel.mul %n, %w : tensor<8x8xf32>, tensor<8xf32> -> tensor<8x8xf32>
  func.return %y : tensor<8x8xf32>
}

// SiLU-gated MLP, silu written as a * sigmoid(a): arm 1 is one fuel.gated_mlp.
// CHECK-LABEL: func.func @gated_mlp
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[G:.*]]: tensor<8x16xf32>, %[[U:.*]]: tensor<8x16xf32>, %[[D:.*]]: tensor<16x8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.branch variant -> tensor<4x8xf32> arm {
// CHECK-NEXT:      %[[A:.*]] = fuel.matmul %[[X]], %[[G]]
// CHECK-NEXT:      %[[S:.*]] = fuel.sigmoid %[[A]]
// CHECK-NEXT:      %[[H:.*]] = fuel.mul %[[A]], %[[S]]
// CHECK-NEXT:      %[[B:.*]] = fuel.matmul %[[X]], %[[U]]
// CHECK-NEXT:      %[[P:.*]] = fuel.mul %[[H]], %[[B]]
// CHECK-NEXT:      %[[O:.*]] = fuel.matmul %[[P]], %[[D]]
// CHECK-NEXT:      fuel.yield %[[O]]
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.gated_mlp %[[X]], %[[G]], %[[U]], %[[D]] {fuel.fused = "gated_mlp"}
// CHECK-NEXT:      fuel.yield %[[F]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]]
func.func @gated_mlp(%x: tensor<4x8xf32>, %g: tensor<8x16xf32>, %u: tensor<8x16xf32>, %d: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %a = fuel.matmul %x, %g : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %s = fuel.sigmoid %a : tensor<4x16xf32>
  %h = fuel.mul %a, %s : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %b = fuel.matmul %x, %u : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %p = fuel.mul %h, %b : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %y = fuel.matmul %p, %d : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// Gate and up projections read different inputs: not one MLP (silu(matmul) alone may be a
// matmul + act with no bias).
// CHECK-LABEL: func.func @gated_mlp_two_inputs_not_applied
// CHECK-NOT:     fuel.gated_mlp
// CHECK:         func.return
func.func @gated_mlp_two_inputs_not_applied(%x: tensor<4x8xf32>, %x2: tensor<4x8xf32>, %g: tensor<8x16xf32>, %u: tensor<8x16xf32>, %d: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %a = fuel.matmul %x, %g : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %h = fuel.silu %a : tensor<4x16xf32>
  %b = fuel.matmul %x2, %u : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %p = fuel.mul %h, %b : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %y = fuel.matmul %p, %d : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// Linear layer with a tanh GELU, bias added on the left.
// CHECK-LABEL: func.func @matmul_bias_act
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.branch variant -> tensor<2x4x16xf32> arm {
// CHECK-NEXT:      %[[M:.*]] = fuel.matmul %[[X]], %[[W]]
// CHECK-NEXT:      %[[A:.*]] = fuel.add %[[B]], %[[M]]
// CHECK-NEXT:      %[[G:.*]] = fuel.gelu %[[A]] tanh
// CHECK-NEXT:      fuel.yield %[[G]]
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.matmul_bias_act %[[X]], %[[W]], %[[B]] act = "gelu_tanh" {fuel.fused = "matmul_bias_act"}
// CHECK-NEXT:      fuel.yield %[[F]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]]
func.func @matmul_bias_act(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %m = fuel.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %a = fuel.add %b, %m : tensor<16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %y = fuel.gelu %a tanh : tensor<2x4x16xf32>
  func.return %y : tensor<2x4x16xf32>
}

// The "bias" is a full matrix, not a per-column vector: not a linear layer's bias.
// CHECK-LABEL: func.func @matmul_bias_act_matrix_bias_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @matmul_bias_act_matrix_bias_not_applied(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = fuel.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %a = fuel.add %m, %b : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %y = fuel.relu %a : tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// GELU as ONNX exporters write it before opset 20, (y * (1 + erf(y / sqrt 2))) * 0.5: act gelu.
// CHECK-LABEL: func.func @matmul_bias_act_gelu_erf
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK:         %[[Y:.*]] = fuel.branch variant -> tensor<4x16xf32> arm {
// CHECK-NEXT:      %[[M:.*]] = fuel.matmul %[[X]], %[[W]]
// CHECK-NEXT:      %[[A:.*]] = fuel.add %[[M]], %[[B]]
// CHECK-NEXT:      %[[D:.*]] = fuel.div %[[A]], %{{.*}}
// CHECK-NEXT:      %[[E:.*]] = fuel.erf %[[D]]
// CHECK-NEXT:      %[[G:.*]] = fuel.add %[[E]], %{{.*}}
// CHECK-NEXT:      %[[P:.*]] = fuel.mul %[[A]], %[[G]]
// CHECK-NEXT:      %[[H:.*]] = fuel.mul %[[P]], %{{.*}}
// CHECK-NEXT:      fuel.yield %[[H]]
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.matmul_bias_act %[[X]], %[[W]], %[[B]] act = "gelu" {fuel.fused = "matmul_bias_act"}
// CHECK-NEXT:      fuel.yield %[[F]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]]
func.func @matmul_bias_act_gelu_erf(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %sqrt2 = fuel.constant dense<1.41421354> : tensor<f32>
  %one = fuel.constant dense<1.000000e+00> : tensor<f32>
  %half = fuel.constant dense<5.000000e-01> : tensor<f32>
  %m = fuel.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %a = fuel.add %m, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %d = fuel.div %a, %sqrt2 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %e = fuel.erf %d : tensor<4x16xf32>
  %g = fuel.add %e, %one : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %p = fuel.mul %a, %g : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %y = fuel.mul %p, %half : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// erf(y / 2) is not GELU's erf(y / sqrt 2): only the bias add fuses (act none).
// CHECK-LABEL: func.func @matmul_bias_act_gelu_erf_not_applied
// CHECK:         %[[A:.*]] = fuel.branch variant
// CHECK:           fuel.matmul_bias_act {{.*}} act = "none"
// CHECK:         %[[D:.*]] = fuel.div %[[A]], %{{.*}}
// CHECK-NEXT:    fuel.erf %[[D]]
func.func @matmul_bias_act_gelu_erf_not_applied(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %two = fuel.constant dense<2.000000e+00> : tensor<f32>
  %one = fuel.constant dense<1.000000e+00> : tensor<f32>
  %half = fuel.constant dense<5.000000e-01> : tensor<f32>
  %m = fuel.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %a = fuel.add %m, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %d = fuel.div %a, %two : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %e = fuel.erf %d : tensor<4x16xf32>
  %g = fuel.add %e, %one : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %p = fuel.mul %a, %g : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %y = fuel.mul %p, %half : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// Rotate-half rope with HF's cat(t, t) tables (shared, so left outside): arm 1 reads the halves.
// CHECK-LABEL: func.func @rope
// CHECK-SAME:    (%[[X:.*]]: tensor<1x2x4x8xf32>, %[[C:.*]]: tensor<4x4xf32>, %[[S:.*]]: tensor<4x4xf32>)
// CHECK-NEXT:    %[[COS:.*]] = fuel.concat %[[C]], %[[C]] axis = -1
// CHECK-NEXT:    %[[SIN:.*]] = fuel.concat %[[S]], %[[S]] axis = -1
// CHECK-NEXT:    %[[Y:.*]] = fuel.branch variant -> tensor<1x2x4x8xf32> arm {
// CHECK-NEXT:      %[[LO:.*]] = fuel.slice %[[X]] starts = [0, 0, 0, 0] limits = [1, 2, 4, 4]
// CHECK-NEXT:      %[[HI:.*]] = fuel.slice %[[X]] starts = [0, 0, 0, 4] limits = [1, 2, 4, 8]
// CHECK-NEXT:      %[[N:.*]] = fuel.neg %[[HI]]
// CHECK-NEXT:      %[[R:.*]] = fuel.concat %[[N]], %[[LO]] axis = 3
// CHECK-NEXT:      %[[A:.*]] = fuel.mul %[[X]], %[[COS]]
// CHECK-NEXT:      %[[B:.*]] = fuel.mul %[[R]], %[[SIN]]
// CHECK-NEXT:      %[[O:.*]] = fuel.add %[[A]], %[[B]]
// CHECK-NEXT:      fuel.yield %[[O]]
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.rope %[[X]], %[[C]], %[[S]] {fuel.fused = "rope"}
// CHECK-NEXT:      fuel.yield %[[F]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]]
func.func @rope(%x: tensor<1x2x4x8xf32>, %c: tensor<4x4xf32>, %s: tensor<4x4xf32>) -> tensor<1x2x4x8xf32> {
  %cos = fuel.concat %c, %c axis = -1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
  %sin = fuel.concat %s, %s axis = -1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
  %x1 = fuel.slice %x starts = [0, 0, 0, 0] limits = [1, 2, 4, 4] steps = [1, 1, 1, 1] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %x2 = fuel.slice %x starts = [0, 0, 0, 4] limits = [1, 2, 4, 8] steps = [1, 1, 1, 1] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %n = fuel.neg %x2 : tensor<1x2x4x4xf32>
  %r = fuel.concat %n, %x1 axis = 3 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x8xf32>
  %a = fuel.mul %x, %cos : tensor<1x2x4x8xf32>, tensor<4x8xf32> -> tensor<1x2x4x8xf32>
  %b = fuel.mul %r, %sin : tensor<1x2x4x8xf32>, tensor<4x8xf32> -> tensor<1x2x4x8xf32>
  %y = fuel.add %a, %b : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  func.return %y : tensor<1x2x4x8xf32>
}

// Tables of unknown content (arguments): their halves may differ, fuel.rope could not say so.
// CHECK-LABEL: func.func @rope_unknown_tables_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @rope_unknown_tables_not_applied(%x: tensor<1x2x4x8xf32>, %cos: tensor<4x8xf32>, %sin: tensor<4x8xf32>) -> tensor<1x2x4x8xf32> {
  %x1 = fuel.slice %x starts = [0, 0, 0, 0] limits = [1, 2, 4, 4] steps = [1, 1, 1, 1] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %x2 = fuel.slice %x starts = [0, 0, 0, 4] limits = [1, 2, 4, 8] steps = [1, 1, 1, 1] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %n = fuel.neg %x2 : tensor<1x2x4x4xf32>
  %r = fuel.concat %n, %x1 axis = 3 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x8xf32>
  %a = fuel.mul %x, %cos : tensor<1x2x4x8xf32>, tensor<4x8xf32> -> tensor<1x2x4x8xf32>
  %b = fuel.mul %r, %sin : tensor<1x2x4x8xf32>, tensor<4x8xf32> -> tensor<1x2x4x8xf32>
  %y = fuel.add %a, %b : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  func.return %y : tensor<1x2x4x8xf32>
}

// A decode step's rope: table rows gathered at the position, the tables' halves equal (checked
// on the values). Arm 1 slices the gathered rows' first halves: no per-step table copy.
// CHECK-LABEL: func.func @rope_gathered
// CHECK-SAME:    (%[[X:.*]]: tensor<1x2x1x8xf32>, %[[P:.*]]: tensor<1xi64>)
// CHECK-NEXT:    %[[CT:.*]] = fuel.constant
// CHECK-NEXT:    %[[COS:.*]] = fuel.gather %[[CT]], %[[P]] axis = 0
// CHECK-NEXT:    %[[ST:.*]] = fuel.constant
// CHECK-NEXT:    %[[SIN:.*]] = fuel.gather %[[ST]], %[[P]] axis = 0
// CHECK-NEXT:    %[[Y:.*]] = fuel.branch variant -> tensor<1x2x1x8xf32> arm {
// CHECK-NEXT:      %[[LO:.*]] = fuel.slice %[[X]] starts = [0, 0, 0, 0] limits = [1, 2, 1, 4]
// CHECK-NEXT:      %[[HI:.*]] = fuel.slice %[[X]] starts = [0, 0, 0, 4] limits = [1, 2, 1, 8]
// CHECK-NEXT:      %[[N:.*]] = fuel.neg %[[HI]]
// CHECK-NEXT:      %[[R:.*]] = fuel.concat %[[N]], %[[LO]] axis = 3
// CHECK-NEXT:      %[[A:.*]] = fuel.mul %[[X]], %[[COS]]
// CHECK-NEXT:      %[[B:.*]] = fuel.mul %[[R]], %[[SIN]]
// CHECK-NEXT:      %[[O:.*]] = fuel.add %[[A]], %[[B]]
// CHECK-NEXT:      fuel.yield %[[O]]
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[CH:.*]] = fuel.slice %[[COS]] starts = [0, 0] limits = [1, 4] steps = [1, 1] : tensor<1x8xf32> -> tensor<1x4xf32>
// CHECK-NEXT:      %[[SH:.*]] = fuel.slice %[[SIN]] starts = [0, 0] limits = [1, 4] steps = [1, 1] : tensor<1x8xf32> -> tensor<1x4xf32>
// CHECK-NEXT:      %[[F:.*]] = fuel.rope %[[X]], %[[CH]], %[[SH]] {fuel.fused = "rope"}
// CHECK-NEXT:      fuel.yield %[[F]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]]
func.func @rope_gathered(%x: tensor<1x2x1x8xf32>, %pos: tensor<1xi64>) -> tensor<1x2x1x8xf32> {
  %ct = fuel.constant dense<[[1.0, 0.5, 0.25, 0.125, 1.0, 0.5, 0.25, 0.125], [0.5, 0.25, 0.125, 1.0, 0.5, 0.25, 0.125, 1.0]]> : tensor<2x8xf32>
  %cos = fuel.gather %ct, %pos axis = 0 : tensor<2x8xf32>, tensor<1xi64> -> tensor<1x8xf32>
  %st = fuel.constant dense<[[0.0, 0.5, -0.5, 1.0, 0.0, 0.5, -0.5, 1.0], [1.0, -1.0, 2.0, -2.0, 1.0, -1.0, 2.0, -2.0]]> : tensor<2x8xf32>
  %sin = fuel.gather %st, %pos axis = 0 : tensor<2x8xf32>, tensor<1xi64> -> tensor<1x8xf32>
  %x1 = fuel.slice %x starts = [0, 0, 0, 0] limits = [1, 2, 1, 4] steps = [1, 1, 1, 1] : tensor<1x2x1x8xf32> -> tensor<1x2x1x4xf32>
  %x2 = fuel.slice %x starts = [0, 0, 0, 4] limits = [1, 2, 1, 8] steps = [1, 1, 1, 1] : tensor<1x2x1x8xf32> -> tensor<1x2x1x4xf32>
  %n = fuel.neg %x2 : tensor<1x2x1x4xf32>
  %r = fuel.concat %n, %x1 axis = 3 : tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32> -> tensor<1x2x1x8xf32>
  %a = fuel.mul %x, %cos : tensor<1x2x1x8xf32>, tensor<1x8xf32> -> tensor<1x2x1x8xf32>
  %b = fuel.mul %r, %sin : tensor<1x2x1x8xf32>, tensor<1x8xf32> -> tensor<1x2x1x8xf32>
  %y = fuel.add %a, %b : tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32> -> tensor<1x2x1x8xf32>
  func.return %y : tensor<1x2x1x8xf32>
}

// A sin table whose halves differ in one entry is not a rotate-half table.
// CHECK-LABEL: func.func @rope_gathered_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @rope_gathered_not_applied(%x: tensor<1x2x1x8xf32>, %pos: tensor<1xi64>) -> tensor<1x2x1x8xf32> {
  %ct = fuel.constant dense<[[1.0, 0.5, 0.25, 0.125, 1.0, 0.5, 0.25, 0.125], [0.5, 0.25, 0.125, 1.0, 0.5, 0.25, 0.125, 1.0]]> : tensor<2x8xf32>
  %cos = fuel.gather %ct, %pos axis = 0 : tensor<2x8xf32>, tensor<1xi64> -> tensor<1x8xf32>
  %st = fuel.constant dense<[[0.0, 0.5, -0.5, 1.0, 0.0, 0.5, -0.5, 1.0], [1.0, -1.0, 2.0, -2.0, 1.0, -1.0, 2.0, -4.0]]> : tensor<2x8xf32>
  %sin = fuel.gather %st, %pos axis = 0 : tensor<2x8xf32>, tensor<1xi64> -> tensor<1x8xf32>
  %x1 = fuel.slice %x starts = [0, 0, 0, 0] limits = [1, 2, 1, 4] steps = [1, 1, 1, 1] : tensor<1x2x1x8xf32> -> tensor<1x2x1x4xf32>
  %x2 = fuel.slice %x starts = [0, 0, 0, 4] limits = [1, 2, 1, 8] steps = [1, 1, 1, 1] : tensor<1x2x1x8xf32> -> tensor<1x2x1x4xf32>
  %n = fuel.neg %x2 : tensor<1x2x1x4xf32>
  %r = fuel.concat %n, %x1 axis = 3 : tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32> -> tensor<1x2x1x8xf32>
  %a = fuel.mul %x, %cos : tensor<1x2x1x8xf32>, tensor<1x8xf32> -> tensor<1x2x1x8xf32>
  %b = fuel.mul %r, %sin : tensor<1x2x1x8xf32>, tensor<1x8xf32> -> tensor<1x2x1x8xf32>
  %y = fuel.add %a, %b : tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32> -> tensor<1x2x1x8xf32>
  func.return %y : tensor<1x2x1x8xf32>
}

// Rows of weights: their values are not in the IR, so fuel-opt cannot check the halves (the
// pipeline in-process can: `known_weights`).
// CHECK-LABEL: func.func @rope_gathered_weights_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @rope_gathered_weights_not_applied(%x: tensor<1x2x1x8xf32>, %pos: tensor<1xi64>) -> tensor<1x2x1x8xf32> {
  %ct = fuel.weight "cos" : tensor<2x8xf32>
  %cos = fuel.gather %ct, %pos axis = 0 : tensor<2x8xf32>, tensor<1xi64> -> tensor<1x8xf32>
  %st = fuel.weight "sin" : tensor<2x8xf32>
  %sin = fuel.gather %st, %pos axis = 0 : tensor<2x8xf32>, tensor<1xi64> -> tensor<1x8xf32>
  %x1 = fuel.slice %x starts = [0, 0, 0, 0] limits = [1, 2, 1, 4] steps = [1, 1, 1, 1] : tensor<1x2x1x8xf32> -> tensor<1x2x1x4xf32>
  %x2 = fuel.slice %x starts = [0, 0, 0, 4] limits = [1, 2, 1, 8] steps = [1, 1, 1, 1] : tensor<1x2x1x8xf32> -> tensor<1x2x1x4xf32>
  %n = fuel.neg %x2 : tensor<1x2x1x4xf32>
  %r = fuel.concat %n, %x1 axis = 3 : tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32> -> tensor<1x2x1x8xf32>
  %a = fuel.mul %x, %cos : tensor<1x2x1x8xf32>, tensor<1x8xf32> -> tensor<1x2x1x8xf32>
  %b = fuel.mul %r, %sin : tensor<1x2x1x8xf32>, tensor<1x8xf32> -> tensor<1x2x1x8xf32>
  %y = fuel.add %a, %b : tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32> -> tensor<1x2x1x8xf32>
  func.return %y : tensor<1x2x1x8xf32>
}


// Scaled, causally masked attention from matmul/softmax: arm 1 is fuel.attention causal.
// CHECK-LABEL: func.func @attention
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x3x4xf32>, %[[K:.*]]: tensor<1x2x3x4xf32>, %[[V:.*]]: tensor<1x2x3x4xf32>)
// CHECK:         %[[O:.*]] = fuel.branch variant -> tensor<1x2x3x4xf32> arm {
// CHECK-NEXT:      fuel.transpose %[[K]] perm = [0, 1, 3, 2]
// CHECK-NEXT:      fuel.matmul %[[Q]]
// CHECK-NEXT:      fuel.mul
// CHECK-NEXT:      fuel.add
// CHECK-NEXT:      fuel.softmax
// CHECK-NEXT:      %[[R:.*]] = fuel.matmul %{{.*}}, %[[V]]
// CHECK-NEXT:      fuel.yield %[[R]]
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] causal scale = 5.000000e-01 {fuel.fused = "attention"}
// CHECK-NEXT:      fuel.yield %[[F]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[O]]
func.func @attention(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %scale = fuel.constant dense<5.000000e-01> : tensor<f32>
  %mask = fuel.constant dense<[[0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %kt = fuel.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %t = fuel.mul %s, %scale : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %m = fuel.add %t, %mask : tensor<1x2x3x3xf32>, tensor<3x3xf32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %m axis = -1 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// An upper-triangular (anti-causal) mask is not `causal`: it becomes the additive mask operand.
// CHECK-LABEL: func.func @attention_mask_not_causal
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x3x4xf32>, %[[K:.*]]: tensor<1x2x3x4xf32>, %[[V:.*]]: tensor<1x2x3x4xf32>)
// CHECK-NEXT:    %[[M:.*]] = fuel.constant
// CHECK:         } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.attention %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<3x3xf32>) scale = 1.000000e+00 {fuel.fused = "attention"}
func.func @attention_mask_not_causal(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %mask = fuel.constant dense<[[0.0, 0.0, 0.0], [-1.0e+09, 0.0, 0.0], [-1.0e+09, -1.0e+09, 0.0]]> : tensor<3x3xf32>
  %kt = fuel.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %m = fuel.add %s, %mask : tensor<1x2x3x3xf32>, tensor<3x3xf32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %m axis = -1 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// A mask added before the scale is scaled with the scores: not attention's mask, not fused.
// CHECK-LABEL: func.func @attention_mask_not_causal_not_applied
// CHECK-NOT:     fuel.branch
// CHECK:         func.return
func.func @attention_mask_not_causal_not_applied(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %c = fuel.constant dense<5.000000e-01> : tensor<f32>
  %mask = fuel.constant dense<[[0.0, 0.0, 0.0], [-1.0e+09, 0.0, 0.0], [-1.0e+09, -1.0e+09, 0.0]]> : tensor<3x3xf32>
  %kt = fuel.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %s = fuel.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %m = fuel.add %s, %mask : tensor<1x2x3x3xf32>, tensor<3x3xf32> -> tensor<1x2x3x3xf32>
  %t = fuel.mul %m, %c : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %p = fuel.softmax %t axis = -1 : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = fuel.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}
