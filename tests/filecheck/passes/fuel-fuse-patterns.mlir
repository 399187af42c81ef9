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
