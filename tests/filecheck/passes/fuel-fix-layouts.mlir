// RUN: fuel-opt %s -p fuel-fix-layouts | filecheck %s

// fuel has no strided producer today (every kernel writes a fresh contiguous buffer; reshape
// and copy view such buffers), so the check passes and nothing changes. The failing case needs
// a strided view op; tests/passes/test_fix_layouts.py registers one to exercise it.

// A contiguous-only transpose (numpy-contig, no strided_input) reading a reshape of a kernel
// result: the view is contiguous, no fixup needed.
// CHECK-LABEL: func.func @contig_kernel_reads_view_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[N:.*]] = fuel.neg %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[R:.*]] = fuel.reshape %[[N]] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    %[[C:.*]] = fuel.copy %[[R]] to "cpu" : tensor<8x4xf32>
// CHECK-NEXT:    %[[T:.*]] = fuel.transpose %[[C]] perm = [1, 0] {fuel.kernel = #fuel.kernel<"transpose", [f32, f32], "cpu", "numpy-contig", "0000000000000000">} : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[T]]
func.func @contig_kernel_reads_view_not_applied(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %n = fuel.neg %x : tensor<4x8xf32>
  %r = fuel.reshape %n : tensor<4x8xf32> -> tensor<8x4xf32>
  %c = fuel.copy %r to "cpu" : tensor<8x4xf32>
  %t = fuel.transpose %c perm = [1, 0] {fuel.kernel = #fuel.kernel<"transpose", [f32, f32], "cpu", "numpy-contig", "0000000000000000">} : tensor<8x4xf32> -> tensor<4x8xf32>
  func.return %t : tensor<4x8xf32>
}

// A strided-capable kernel reading a transpose result: nothing to check either way.
// CHECK-LABEL: func.func @strided_kernel_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[T:.*]] = fuel.transpose %[[X]] perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    %[[N:.*]] = fuel.neg %[[T]] {fuel.kernel = #fuel.kernel<"neg", [f32, f32], "cpu", "numpy", "0000000000000000">} : tensor<8x4xf32>
// CHECK-NEXT:    func.return %[[N]]
func.func @strided_kernel_not_applied(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %t = fuel.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %n = fuel.neg %t {fuel.kernel = #fuel.kernel<"neg", [f32, f32], "cpu", "numpy", "0000000000000000">} : tensor<8x4xf32>
  func.return %n : tensor<8x4xf32>
}
