// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// CHECK-LABEL: func.func @copy_between_devices
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[G:.*]] = fuel.copy %[[X]] to "cuda:0" : tensor<4x8xf32>
// CHECK-NEXT:    %[[H:.*]] = fuel.copy %[[G]] to "cpu" : tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[H]] : tensor<4x8xf32>
func.func @copy_between_devices(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %g = fuel.copy %x to "cuda:0" : tensor<4x8xf32>
  %h = fuel.copy %g to "cpu" : tensor<4x8xf32>
  func.return %h : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @ranked_candidates
// CHECK-NEXT:    %{{.*}} = fuel.exp %{{.*}} {fuel.alternatives = [#fuel.candidate<"numpy", backend "cpu", device "cpu", rev "00000000000000ff", l1 = 1200.0, judge = none, xfer = 0.0, verdict "winner">, #fuel.candidate<"triton", backend "cuda", device "cuda:1", rev "0123456789abcdef", l1 = 12.5, judge = 3.25, xfer = 100000.0, verdict "rejected:precision-floor">], fuel.pin = #fuel.device<"cpu">} : tensor<4xf32>
func.func @ranked_candidates(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fuel.exp %x {fuel.alternatives = [#fuel.candidate<"numpy", backend "cpu", device "cpu", rev "00000000000000ff", l1 = 1200.0, judge = none, xfer = 0.0, verdict "winner">, #fuel.candidate<"triton", backend "cuda", device "cuda:1", rev "0123456789abcdef", l1 = 12.5, judge = 3.25, xfer = 1.0e5, verdict "rejected:precision-floor">], fuel.pin = #fuel.device<"cpu">} : tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// An infeasible candidate (priced infinite) round-trips as `inf`.
// CHECK-LABEL: func.func @infeasible_candidate
// CHECK-NEXT:    %{{.*}} = fuel.exp %{{.*}} {fuel.alternatives = [#fuel.candidate<"numpy-flashdecode", backend "cpu", device "cpu", rev "00000000000000ff", l1 = inf, judge = none, xfer = 0.0, verdict "rejected:infeasible">]} : tensor<4xf32>
func.func @infeasible_candidate(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fuel.exp %x {fuel.alternatives = [#fuel.candidate<"numpy-flashdecode", backend "cpu", device "cpu", rev "00000000000000ff", l1 = inf, judge = none, xfer = 0.0, verdict "rejected:infeasible">]} : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
