// RUN: fuel-opt %s -p fuel-converge-frontier | filecheck %s

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
