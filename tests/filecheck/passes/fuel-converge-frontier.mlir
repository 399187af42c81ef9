// RUN: fuel-opt %s -p 'fuel-converge-frontier{judge="none"}' | filecheck %s

// Arms 1 and 2 are the same route (SSA names differ): arm 2 merges into arm 1.
// CHECK-LABEL: func.func @merge
// CHECK-NEXT:    %[[B:.*]] = fuel.branch placement -> tensor<4xf32> arm {
// CHECK-NEXT:      %[[A:.*]] = fuel.exp %{{.*}} {fuel.device = #fuel.device<"cpu">} : tensor<4xf32>
// CHECK-NEXT:      fuel.yield %[[A]] : tensor<4xf32>
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[C:.*]] = fuel.copy %{{.*}} to "cuda:0" : tensor<4xf32>
// CHECK-NEXT:      %[[E:.*]] = fuel.exp %[[C]] {fuel.device = #fuel.device<"cuda:0">} : tensor<4xf32>
// CHECK-NEXT:      %[[D:.*]] = fuel.copy %[[E]] to "cpu" : tensor<4xf32>
// CHECK-NEXT:      fuel.yield %[[D]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[B]] : tensor<4xf32>
func.func @merge(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = fuel.branch placement -> tensor<4xf32> arm {
    %a = fuel.exp %x {fuel.device = #fuel.device<"cpu">} : tensor<4xf32>
    fuel.yield %a : tensor<4xf32>
  } arm {
    %c = fuel.copy %x to "cuda:0" : tensor<4xf32>
    %e = fuel.exp %c {fuel.device = #fuel.device<"cuda:0">} : tensor<4xf32>
    %d = fuel.copy %e to "cpu" : tensor<4xf32>
    fuel.yield %d : tensor<4xf32>
  } arm {
    %c2 = fuel.copy %x to "cuda:0" : tensor<4xf32>
    %e2 = fuel.exp %c2 {fuel.device = #fuel.device<"cuda:0">} : tensor<4xf32>
    %d2 = fuel.copy %e2 to "cpu" : tensor<4xf32>
    fuel.yield %d2 : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}

// An arm identical to arm 0 is no choice: the branch is left with one arm and inlined.
// CHECK-LABEL: func.func @collapse
// CHECK-NEXT:    %[[A:.*]] = fuel.tanh %{{.*}} : tensor<4xf32>
// CHECK-NEXT:    func.return %[[A]] : tensor<4xf32>
func.func @collapse(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = fuel.branch variant -> tensor<4xf32> arm {
    %a = fuel.tanh %x : tensor<4xf32>
    fuel.yield %a : tensor<4xf32>
  } arm {
    %b = fuel.tanh %x : tensor<4xf32>
    fuel.yield %b : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}

// Arms that read different values are different routes: kept.
// CHECK-LABEL: func.func @merge_not_applied
// CHECK-NEXT:    %{{.*}} = fuel.branch variant -> tensor<4xf32> arm {
// CHECK-NEXT:      fuel.exp %[[X:[a-z0-9]+]]
// CHECK-NEXT:      fuel.yield
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      fuel.exp %[[Y:[a-z0-9]+]]
func.func @merge_not_applied(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %r = fuel.branch variant -> tensor<4xf32> arm {
    %a = fuel.exp %x : tensor<4xf32>
    fuel.yield %a : tensor<4xf32>
  } arm {
    %b = fuel.exp %y : tensor<4xf32>
    fuel.yield %b : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}

// Arm 2 is arm 1 plus two negations: no cheaper component, strictly slower. It goes, and the
// pick it held moves to arm 1, which dominates it. Arm 0 (fused) and arm 1 trade off: both kept.
// CHECK-LABEL: func.func @dominated
// CHECK-NEXT:    %{{.*}} = fuel.branch variant -> tensor<4x8xf32> arm {
// CHECK-NEXT:      fuel.softmax
// CHECK-NEXT:      fuel.yield
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      fuel.reduce_max
// CHECK-NEXT:      fuel.sub
// CHECK-NEXT:      fuel.exp
// CHECK-NEXT:      fuel.reduce_sum
// CHECK-NEXT:      fuel.div
// CHECK-NEXT:      fuel.yield
// CHECK-NEXT:    } {fuel.picked = 1 : i64}
func.func @dominated(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = fuel.branch variant -> tensor<4x8xf32> arm {
    %a = fuel.softmax %x axis = -1 : tensor<4x8xf32> -> tensor<4x8xf32>
    fuel.yield %a : tensor<4x8xf32>
  } arm {
    %m = fuel.reduce_max %x axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = fuel.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    %e = fuel.exp %d : tensor<4x8xf32>
    %s = fuel.reduce_sum %e axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
    %y = fuel.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    fuel.yield %y : tensor<4x8xf32>
  } arm {
    %m = fuel.reduce_max %x axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = fuel.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    %n = fuel.neg %d : tensor<4x8xf32>
    %p = fuel.neg %n : tensor<4x8xf32>
    %e = fuel.exp %p : tensor<4x8xf32>
    %s = fuel.reduce_sum %e axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
    %y = fuel.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    fuel.yield %y : tensor<4x8xf32>
  } {fuel.picked = 2 : i64}
  func.return %r : tensor<4x8xf32>
}

// Arm 0 is dominated by arm 1 but is the reference: never pruned. Arm 1 is dominated only by
// a gated arm (when the gate fails, arm 1 is still a route): kept.
// CHECK-LABEL: func.func @dominated_not_applied
// CHECK-NEXT:    %{{.*}} = fuel.branch variant (%{{.*}} : tensor<4xf32>) -> tensor<4xf32> arm {
// CHECK-COUNT-4:   fuel.neg
// CHECK-NEXT:      fuel.exp
// CHECK-NEXT:      fuel.yield
// CHECK-NEXT:    } arm {
// CHECK-COUNT-2:   fuel.neg
// CHECK-NEXT:      fuel.exp
// CHECK-NEXT:      fuel.yield
// CHECK-NEXT:    } arm if "dim($0, 0) == 4" {
// CHECK-NEXT:      fuel.exp
func.func @dominated_not_applied(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = fuel.branch variant (%x : tensor<4xf32>) -> tensor<4xf32> arm {
    %a = fuel.neg %x : tensor<4xf32>
    %b = fuel.neg %a : tensor<4xf32>
    %c = fuel.neg %b : tensor<4xf32>
    %d = fuel.neg %c : tensor<4xf32>
    %e = fuel.exp %d : tensor<4xf32>
    fuel.yield %e : tensor<4xf32>
  } arm {
    %a = fuel.neg %x : tensor<4xf32>
    %b = fuel.neg %a : tensor<4xf32>
    %e = fuel.exp %b : tensor<4xf32>
    fuel.yield %e : tensor<4xf32>
  } arm if "dim($0, 0) == 4" {
    %e = fuel.exp %x : tensor<4xf32>
    fuel.yield %e : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}
