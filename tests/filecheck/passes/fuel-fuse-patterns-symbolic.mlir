// RUN: fuel-opt %s -p fuel-fuse-patterns | filecheck %s
// RUN: fuel-opt %s -p fuel-fuse-patterns,fuel-fuse-patterns | filecheck %s

// Patterns at symbolic shapes: two `?` dims are one dim only when their symbols say so
// (`passes.fused.symbolic`). Rope over x (1, 2, seq, 8) with HF's cat(t, t) tables of seq
// rows, one of them through HF's unsqueeze (a reshape adding a leading 1) and slices that run
// "to the end" of the `?` dim: fused.
// CHECK-LABEL: func.func @rope_symbolic
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<1x2x?x8xf32> {{.*}}, %[[C:[^:]*]]: tensor<?x4xf32> {{.*}}, %[[S:[^:]*]]: tensor<?x4xf32> {{.*}})
// CHECK:         %[[COS:.*]] = fuel.concat %[[C]], %[[C]] axis = -1
// CHECK-NEXT:    %[[SIN:.*]] = fuel.concat %[[S]], %[[S]] axis = -1
// CHECK-NEXT:    %[[SIN4:.*]] = fuel.reshape %[[SIN]] : tensor<?x8xf32> -> tensor<1x1x?x8xf32>
// CHECK-NEXT:    %[[Y:.*]] = fuel.branch variant -> tensor<1x2x?x8xf32> arm {
// CHECK:           %[[A:.*]] = fuel.mul %[[X]], %[[COS]]
// CHECK-NEXT:      %[[B:.*]] = fuel.mul %{{.*}}, %[[SIN4]]
// CHECK-NEXT:      %[[O:.*]] = fuel.add %[[A]], %[[B]]
// CHECK-NEXT:      fuel.yield %[[O]]
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[F:.*]] = fuel.rope %[[X]], %[[C]], %[[S]] {fuel.fused = "rope"}
// CHECK-NEXT:      fuel.yield %[[F]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]]
func.func @rope_symbolic(%x: tensor<1x2x?x8xf32> {fuel.dim_names = ["seq"]}, %c: tensor<?x4xf32> {fuel.dim_names = ["seq"]}, %s: tensor<?x4xf32> {fuel.dim_names = ["seq"]}) -> tensor<1x2x?x8xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 64>}} {
  %cos = fuel.concat %c, %c axis = -1 : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x8xf32>
  %sin = fuel.concat %s, %s axis = -1 : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x8xf32>
  %sin4 = fuel.reshape %sin : tensor<?x8xf32> -> tensor<1x1x?x8xf32>
  %x1 = fuel.slice %x starts = [0, 0, 0, 0] limits = [4611686018427387904, 4611686018427387904, 4611686018427387904, 4] steps = [1, 1, 1, 1] : tensor<1x2x?x8xf32> -> tensor<1x2x?x4xf32>
  %x2 = fuel.slice %x starts = [0, 0, 0, 4] limits = [4611686018427387904, 4611686018427387904, 4611686018427387904, 8] steps = [1, 1, 1, 1] : tensor<1x2x?x8xf32> -> tensor<1x2x?x4xf32>
  %n = fuel.neg %x2 : tensor<1x2x?x4xf32>
  %r = fuel.concat %n, %x1 axis = 3 : tensor<1x2x?x4xf32>, tensor<1x2x?x4xf32> -> tensor<1x2x?x8xf32>
  %a = fuel.mul %x, %cos : tensor<1x2x?x8xf32>, tensor<?x8xf32> -> tensor<1x2x?x8xf32>
  %b = fuel.mul %r, %sin4 : tensor<1x2x?x8xf32>, tensor<1x1x?x8xf32> -> tensor<1x2x?x8xf32>
  %y = fuel.add %a, %b : tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32> -> tensor<1x2x?x8xf32>
  func.return %y : tensor<1x2x?x8xf32>
}

// The same rope with tables of `batch` rows: both are `?`, but x has `seq` rows. The primitives
// broadcast a one-row table over every position (batch = 1); fuel.rope would read row i for
// position i. Not fused.
// CHECK-LABEL: func.func @rope_other_symbol_not_applied
// CHECK-NOT:     fuel.branch
// CHECK-NOT:     fuel.rope
// CHECK:         func.return
func.func @rope_other_symbol_not_applied(%x: tensor<1x2x?x8xf32> {fuel.dim_names = ["seq"]}, %c: tensor<?x4xf32> {fuel.dim_names = ["batch"]}, %s: tensor<?x4xf32> {fuel.dim_names = ["batch"]}) -> tensor<1x2x?x8xf32> attributes {fuel.dims = {batch = #fuel.dim<1, 64>, seq = #fuel.dim<1, 64>}} {
  %cos = fuel.concat %c, %c axis = -1 : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x8xf32>
  %sin = fuel.concat %s, %s axis = -1 : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x8xf32>
  %sin4 = fuel.reshape %sin : tensor<?x8xf32> -> tensor<1x1x?x8xf32>
  %x1 = fuel.slice %x starts = [0, 0, 0, 0] limits = [4611686018427387904, 4611686018427387904, 4611686018427387904, 4] steps = [1, 1, 1, 1] : tensor<1x2x?x8xf32> -> tensor<1x2x?x4xf32>
  %x2 = fuel.slice %x starts = [0, 0, 0, 4] limits = [4611686018427387904, 4611686018427387904, 4611686018427387904, 8] steps = [1, 1, 1, 1] : tensor<1x2x?x8xf32> -> tensor<1x2x?x4xf32>
  %n = fuel.neg %x2 : tensor<1x2x?x4xf32>
  %r = fuel.concat %n, %x1 axis = 3 : tensor<1x2x?x4xf32>, tensor<1x2x?x4xf32> -> tensor<1x2x?x8xf32>
  %a = fuel.mul %x, %cos : tensor<1x2x?x8xf32>, tensor<?x8xf32> -> tensor<1x2x?x8xf32>
  %b = fuel.mul %r, %sin4 : tensor<1x2x?x8xf32>, tensor<1x1x?x8xf32> -> tensor<1x2x?x8xf32>
  %y = fuel.add %a, %b : tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32> -> tensor<1x2x?x8xf32>
  func.return %y : tensor<1x2x?x8xf32>
}
