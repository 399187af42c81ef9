// RUN: fuel-opt %s -p fuel-canonicalize | filecheck %s
// RUN: fuel-opt %s -p fuel-canonicalize | fuel-opt -p fuel-canonicalize | filecheck %s

// Phi-3's fused gate-up projection: one product by [wg | wu], then its two halves. Each half
// becomes the product by the weight's columns it keeps; the whole product goes.
// CHECK-LABEL: func.func @gate_up_halves
// CHECK-SAME:    (%[[X:.*]]: tensor<1x12x64xf32>)
// CHECK-NEXT:    %[[W:.*]] = fuel.weight "gate_up" : tensor<64x352xf32>
// CHECK-NEXT:    %[[WG:.*]] = fuel.slice %[[W]] starts = [0, 0] limits = [64, 176] steps = [1, 1] : tensor<64x352xf32> -> tensor<64x176xf32>
// CHECK-NEXT:    %[[G:.*]] = fuel.matmul %[[X]], %[[WG]] : tensor<1x12x64xf32>, tensor<64x176xf32> -> tensor<1x12x176xf32>
// CHECK-NEXT:    %[[WU:.*]] = fuel.slice %[[W]] starts = [0, 176] limits = [64, 352] steps = [1, 1] : tensor<64x352xf32> -> tensor<64x176xf32>
// CHECK-NEXT:    %[[U:.*]] = fuel.matmul %[[X]], %[[WU]] : tensor<1x12x64xf32>, tensor<64x176xf32> -> tensor<1x12x176xf32>
// CHECK-NEXT:    %[[S:.*]] = fuel.silu %[[G]]
// CHECK-NEXT:    %[[M:.*]] = fuel.mul %[[U]], %[[S]]
// CHECK-NEXT:    func.return %[[M]]
func.func @gate_up_halves(%x: tensor<1x12x64xf32>) -> tensor<1x12x176xf32> {
  %w = fuel.weight "gate_up" : tensor<64x352xf32>
  %p = fuel.matmul %x, %w : tensor<1x12x64xf32>, tensor<64x352xf32> -> tensor<1x12x352xf32>
  %g = fuel.slice %p starts = [0, 0, 0] limits = [1, 12, 176] steps = [1, 1, 1] : tensor<1x12x352xf32> -> tensor<1x12x176xf32>
  %u = fuel.slice %p starts = [0, 0, 176] limits = [1, 12, 352] steps = [1, 1, 1] : tensor<1x12x352xf32> -> tensor<1x12x176xf32>
  %s = fuel.silu %g : tensor<1x12x176xf32>
  %m = fuel.mul %u, %s : tensor<1x12x176xf32>, tensor<1x12x176xf32> -> tensor<1x12x176xf32>
  func.return %m : tensor<1x12x176xf32>
}

// At a symbolic seq, a slice keeps the dim whole when its limit runs to the end.
// CHECK-LABEL: func.func @columns_at_a_symbolic_seq
// CHECK:         fuel.slice %{{.*}} starts = [0, 8] limits = [64, 16] steps = [1, 1] : tensor<64x16xf32> -> tensor<64x8xf32>
// CHECK-NEXT:    fuel.matmul %{{.*}} : tensor<1x?x64xf32>, tensor<64x8xf32> -> tensor<1x?x8xf32>
// CHECK-NOT:     tensor<1x?x16xf32>
func.func @columns_at_a_symbolic_seq(%x: tensor<1x?x64xf32> {fuel.dim_names = ["seq"]}) -> tensor<1x?x8xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 256>}} {
  %w = fuel.weight "w" : tensor<64x16xf32>
  %p = fuel.matmul %x, %w : tensor<1x?x64xf32>, tensor<64x16xf32> -> tensor<1x?x16xf32>
  %b = fuel.slice %p starts = [0, 0, 8] limits = [1, 9223372036854775807, 16] steps = [1, 1, 1] : tensor<1x?x16xf32> -> tensor<1x?x8xf32>
  func.return %b : tensor<1x?x8xf32>
}

// Not applied: the product is also read whole (%p returned); the slices overlap (the columns
// would be computed twice); a slice takes rows, not only columns; the right operand is not a
// constant; a slice with a step.
// CHECK-LABEL: func.func @products_not_applied
// CHECK-COUNT-5: fuel.matmul
// CHECK-NOT:     fuel.matmul
func.func @products_not_applied(%x: tensor<4x64xf32>, %v: tensor<64x16xf32>) -> (tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x12xf32>, tensor<4x12xf32>, tensor<2x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %w = fuel.weight "w" : tensor<64x16xf32>
  %p = fuel.matmul %x, %w : tensor<4x64xf32>, tensor<64x16xf32> -> tensor<4x16xf32>
  %a = fuel.slice %p starts = [0, 0] limits = [4, 8] steps = [1, 1] : tensor<4x16xf32> -> tensor<4x8xf32>
  %q = fuel.matmul %x, %w : tensor<4x64xf32>, tensor<64x16xf32> -> tensor<4x16xf32>
  %b = fuel.slice %q starts = [0, 0] limits = [4, 12] steps = [1, 1] : tensor<4x16xf32> -> tensor<4x12xf32>
  %c = fuel.slice %q starts = [0, 4] limits = [4, 16] steps = [1, 1] : tensor<4x16xf32> -> tensor<4x12xf32>
  %r = fuel.matmul %x, %w : tensor<4x64xf32>, tensor<64x16xf32> -> tensor<4x16xf32>
  %d = fuel.slice %r starts = [0, 0] limits = [2, 16] steps = [1, 1] : tensor<4x16xf32> -> tensor<2x16xf32>
  %t = fuel.matmul %x, %v : tensor<4x64xf32>, tensor<64x16xf32> -> tensor<4x16xf32>
  %e = fuel.slice %t starts = [0, 0] limits = [4, 8] steps = [1, 1] : tensor<4x16xf32> -> tensor<4x8xf32>
  %s = fuel.matmul %x, %w : tensor<4x64xf32>, tensor<64x16xf32> -> tensor<4x16xf32>
  %f = fuel.slice %s starts = [0, 0] limits = [4, 16] steps = [1, 2] : tensor<4x16xf32> -> tensor<4x8xf32>
  func.return %p, %a, %b, %c, %d, %e, %f : tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x12xf32>, tensor<4x12xf32>, tensor<2x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
