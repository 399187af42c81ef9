// RUN: fuel-opt %s -p 'fuel-bake-variants{judge="none"}' | filecheck %s

// The fused softmax arm is strictly cheaper than the decomposed reference: the branch collapses
// to it.
// CHECK-LABEL: func.func @softmax_variant
// CHECK-SAME:    (%[[X:.*]]: tensor<256x256xf32>)
// CHECK-NEXT:    %[[F:.*]] = fuel.softmax %[[X]] axis = 1 : tensor<256x256xf32> -> tensor<256x256xf32>
// CHECK-NEXT:    func.return %[[F]] : tensor<256x256xf32>
func.func @softmax_variant(%x: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %r = fuel.branch variant -> tensor<256x256xf32> arm {
    %m = fuel.reduce_max %x axes = [1] keepdim : tensor<256x256xf32> -> tensor<256x1xf32>
    %s = fuel.sub %x, %m : tensor<256x256xf32>, tensor<256x1xf32> -> tensor<256x256xf32>
    %e = fuel.exp %s : tensor<256x256xf32>
    %z = fuel.reduce_sum %e axes = [1] keepdim : tensor<256x256xf32> -> tensor<256x1xf32>
    %y = fuel.div %e, %z : tensor<256x256xf32>, tensor<256x1xf32> -> tensor<256x256xf32>
    fuel.yield %y : tensor<256x256xf32>
  } arm {
    %f = fuel.softmax %x axis = 1 : tensor<256x256xf32> -> tensor<256x256xf32>
    fuel.yield %f : tensor<256x256xf32>
  }
  func.return %r : tensor<256x256xf32>
}

// Placement branches are the runtime picker's: untouched. A costlier arm 1 keeps arm 0.
// CHECK-LABEL: func.func @softmax_variant_not_applied
// CHECK-NEXT:    %[[P:.*]] = fuel.branch placement -> tensor<4xf32> arm {
// CHECK:         %[[A:.*]] = fuel.neg %[[P]] : tensor<4xf32>
// CHECK-NEXT:    func.return %[[A]] : tensor<4xf32>
func.func @softmax_variant_not_applied(%x: tensor<4xf32>) -> tensor<4xf32> {
  %p = fuel.branch placement -> tensor<4xf32> arm {
    fuel.yield %x : tensor<4xf32>
  } arm {
    %n = fuel.neg %x {fuel.pin = #fuel.device<"cuda:0">} : tensor<4xf32>
    fuel.yield %n : tensor<4xf32>
  }
  %v = fuel.branch variant -> tensor<4xf32> arm {
    %a = fuel.neg %p : tensor<4xf32>
    fuel.yield %a : tensor<4xf32>
  } arm {
    %b = fuel.exp %p : tensor<4xf32>
    %c = fuel.neg %b : tensor<4xf32>
    %d = fuel.neg %c : tensor<4xf32>
    fuel.yield %d : tensor<4xf32>
  }
  func.return %v : tensor<4xf32>
}

// A variant gated on a `?` dim (fuel-emit-dim-branches) is the run's choice: untouched.
// CHECK-LABEL: func.func @dim_gated_variant
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<?x256xf32>
// CHECK-NEXT:    %{{.*}} = fuel.branch variant (%[[X]] : tensor<?x256xf32>) -> tensor<?x256xf32> arm {
// CHECK:         } arm if "dim($0, 0) <= 4" {
func.func @dim_gated_variant(%x: tensor<?x256xf32> {fuel.dim_names = ["seq"]}) -> tensor<?x256xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 64>}} {
  %r = fuel.branch variant (%x : tensor<?x256xf32>) -> tensor<?x256xf32> arm {
    %a = fuel.exp %x : tensor<?x256xf32>
    fuel.yield %a : tensor<?x256xf32>
  } arm if "dim($0, 0) <= 4" {
    %b = fuel.exp %x : tensor<?x256xf32>
    fuel.yield %b : tensor<?x256xf32>
  } {fuel.picked = 1 : i64}
  func.return %r : tensor<?x256xf32>
}

// The same gate on a static dim is decided here: arm 0 on a tie.
// CHECK-LABEL: func.func @dim_gated_variant_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<2x256xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.exp %[[X]] : tensor<2x256xf32>
// CHECK-NEXT:    func.return %[[A]] : tensor<2x256xf32>
func.func @dim_gated_variant_not_applied(%x: tensor<2x256xf32>) -> tensor<2x256xf32> {
  %r = fuel.branch variant (%x : tensor<2x256xf32>) -> tensor<2x256xf32> arm {
    %a = fuel.exp %x : tensor<2x256xf32>
    fuel.yield %a : tensor<2x256xf32>
  } arm if "dim($0, 0) <= 4" {
    %b = fuel.exp %x : tensor<2x256xf32>
    fuel.yield %b : tensor<2x256xf32>
  } {fuel.picked = 1 : i64}
  func.return %r : tensor<2x256xf32>
}
