// RUN: fuel-opt %s -p convert-fuel-to-c | filecheck %s
// RUN: fuel-opt %s -p convert-fuel-to-c,convert-fuel-to-c | filecheck %s
// RUN: fuel-opt %s -p 'convert-fuel-to-c{precision="ulp=1"}' | filecheck %s --check-prefix=FLOOR

// A longhand log-softmax over the last axis is one row kernel: per row a pass for the max, one
// for the sum of exponentials (double lanes), one for the outputs.
// CHECK:      fuel.c_kernel @c_fused_0 space = [4, 24] : (tensor<4x24xf32>) -> tensor<4x24xf32> source = "{{.*}}float acc0[16] = {-INFINITY{{.*}}double acc3[16] = {0.0{{.*}}(float)acc3[0];  /* fuel.reduce_sum */{{.*}}"
// CHECK-NEXT:   ^bb0(%[[X:.*]]: tensor<4x24xf32>):
// CHECK-NEXT:     %[[M:.*]] = fuel.reduce_max %[[X]] axes = [-1] keepdim : tensor<4x24xf32> -> tensor<4x1xf32>
// CHECK-NEXT:     %[[D:.*]] = fuel.sub %[[X]], %[[M]]
// CHECK-NEXT:     %[[E:.*]] = fuel.exp %[[D]]
// CHECK-NEXT:     %[[S:.*]] = fuel.reduce_sum %[[E]] axes = [-1] keepdim
// CHECK-NEXT:     %[[L:.*]] = fuel.log %[[S]]
// CHECK-NEXT:     %[[Y:.*]] = fuel.sub %[[D]], %[[L]]
// CHECK-NEXT:     fuel.yield %[[Y]] : tensor<4x24xf32>

// CHECK-LABEL: func.func @log_softmax
// CHECK-SAME:    (%[[X:.*]]: tensor<4x24xf32>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.c_launch @c_fused_0(%[[X]]) : (tensor<4x24xf32>) -> tensor<4x24xf32>
// CHECK-NEXT:    func.return %[[Y]]
// A stated precision floor keeps numpy's reductions (the elementwise ops still fuse).
// FLOOR-LABEL: func.func @log_softmax
// FLOOR-NEXT:    fuel.reduce_max
// FLOOR-NEXT:    fuel.c_launch
// FLOOR-NEXT:    fuel.reduce_sum
func.func @log_softmax(%x: tensor<4x24xf32>) -> tensor<4x24xf32> {
  %m = fuel.reduce_max %x axes = [-1] keepdim : tensor<4x24xf32> -> tensor<4x1xf32>
  %d = fuel.sub %x, %m : tensor<4x24xf32>, tensor<4x1xf32> -> tensor<4x24xf32>
  %e = fuel.exp %d : tensor<4x24xf32>
  %s = fuel.reduce_sum %e axes = [-1] keepdim : tensor<4x24xf32> -> tensor<4x1xf32>
  %l = fuel.log %s : tensor<4x1xf32>
  %y = fuel.sub %d, %l : tensor<4x24xf32>, tensor<4x1xf32> -> tensor<4x24xf32>
  func.return %y : tensor<4x24xf32>
}

// A reduction over another axis stays a library kernel, between two elementwise kernels.
// CHECK-LABEL: func.func @first_axis_not_applied
// CHECK-NEXT:    fuel.c_launch
// CHECK-NEXT:    fuel.reduce_max
// CHECK-NEXT:    fuel.c_launch
func.func @first_axis_not_applied(%x: tensor<4x24xf32>) -> tensor<4x24xf32> {
  %a = fuel.abs %x : tensor<4x24xf32>
  %e = fuel.exp %a : tensor<4x24xf32>
  %m = fuel.reduce_max %e axes = [0] keepdim : tensor<4x24xf32> -> tensor<1x24xf32>
  %d = fuel.sub %x, %m : tensor<4x24xf32>, tensor<1x24xf32> -> tensor<4x24xf32>
  %y = fuel.neg %d : tensor<4x24xf32>
  func.return %y : tensor<4x24xf32>
}
