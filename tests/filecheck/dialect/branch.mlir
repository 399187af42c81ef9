// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// CHECK-LABEL: func.func @gated_variant
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x4x1x8xf32>, %[[N:.*]]: tensor<i64>)
// CHECK-NEXT:    %[[R:.*]] = fuel.branch variant (%[[Q]], %[[N]] : tensor<1x4x1x8xf32>, tensor<i64>) -> tensor<1x4x1x8xf32> arm {
// CHECK-NEXT:      %[[A:.*]] = fuel.exp %[[Q]] : tensor<1x4x1x8xf32>
// CHECK-NEXT:      fuel.yield %[[A]] : tensor<1x4x1x8xf32>
// CHECK-NEXT:    } arm if "dim($0, 2) == 1 && value($1) <= 4096" {
// CHECK-NEXT:      %[[B:.*]] = fuel.exp %[[Q]] : tensor<1x4x1x8xf32>
// CHECK-NEXT:      fuel.yield %[[B]] : tensor<1x4x1x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]] : tensor<1x4x1x8xf32>
func.func @gated_variant(%q: tensor<1x4x1x8xf32>, %n: tensor<i64>) -> tensor<1x4x1x8xf32> {
  %r = fuel.branch variant (%q, %n : tensor<1x4x1x8xf32>, tensor<i64>) -> tensor<1x4x1x8xf32> arm {
    %a = fuel.exp %q : tensor<1x4x1x8xf32>
    fuel.yield %a : tensor<1x4x1x8xf32>
  } arm if "dim($0, 2) == 1 && value($1) <= 4096" {
    %b = fuel.exp %q : tensor<1x4x1x8xf32>
    fuel.yield %b : tensor<1x4x1x8xf32>
  }
  func.return %r : tensor<1x4x1x8xf32>
}

// CHECK-LABEL: func.func @placement_two_results
// CHECK-NEXT:    %{{.*}}, %{{.*}} = fuel.branch placement -> tensor<4xf32>, tensor<4xf32> arm {
// CHECK-NEXT:      fuel.yield %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    } arm {
// CHECK-NEXT:      %[[N:.*]] = fuel.neg %{{.*}} {fuel.pin = #fuel.device<"cuda:0">} : tensor<4xf32>
// CHECK-NEXT:      fuel.yield %[[N]], %[[N]] : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    } {fuel.picked = 1 : i64}
func.func @placement_two_results(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r:2 = fuel.branch placement -> tensor<4xf32>, tensor<4xf32> arm {
    fuel.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  } arm {
    %n = fuel.neg %x {fuel.pin = #fuel.device<"cuda:0">} : tensor<4xf32>
    fuel.yield %n, %n : tensor<4xf32>, tensor<4xf32>
  } {fuel.picked = 1 : i64}
  func.return %r#0 : tensor<4xf32>
}
