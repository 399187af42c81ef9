// RUN: fuel-opt %s -p 'fuel-fix-dtypes{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none"}' | filecheck %s

// No backend has relu@ui8; ui8 widens to i32 losslessly and relu is exact under a widening,
// so the input is cast up and the result cast back.
// CHECK-LABEL: func.func @relu_ui8
// CHECK-SAME:    (%[[X:.*]]: tensor<4xui8>)
// CHECK-NEXT:    %[[A:.*]] = fuel.cast %[[X]] : tensor<4xui8> to tensor<4xi32>
// CHECK-NEXT:    %[[B:.*]] = fuel.relu %[[A]] : tensor<4xi32>
// CHECK-NEXT:    %[[C:.*]] = fuel.cast %[[B]] : tensor<4xi32> to tensor<4xui8>
// CHECK-NEXT:    func.return %[[C]]
func.func @relu_ui8(%x: tensor<4xui8>) -> tensor<4xui8> {
  %a = fuel.relu %x : tensor<4xui8>
  func.return %a : tensor<4xui8>
}

// relu@i8 has a kernel on a candidate backend: nothing to fix.
// CHECK-LABEL: func.func @relu_ui8_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4xi8>)
// CHECK-NEXT:    %[[A:.*]] = fuel.relu %[[X]] : tensor<4xi8>
// CHECK-NEXT:    func.return %[[A]]
func.func @relu_ui8_not_applied(%x: tensor<4xi8>) -> tensor<4xi8> {
  %a = fuel.relu %x : tensor<4xi8>
  func.return %a : tensor<4xi8>
}

// The casts carry the op's pin.
// CHECK-LABEL: func.func @abs_pinned
// CHECK-SAME:    (%[[X:.*]]: tensor<4xui8>)
// CHECK-NEXT:    %[[A:.*]] = fuel.cast %[[X]] {fuel.pin = #fuel.device<"cpu">} : tensor<4xui8> to tensor<4xi32>
// CHECK-NEXT:    %[[B:.*]] = fuel.abs %[[A]] {fuel.pin = #fuel.device<"cpu">} : tensor<4xi32>
// CHECK-NEXT:    %[[C:.*]] = fuel.cast %[[B]] {fuel.pin = #fuel.device<"cpu">} : tensor<4xi32> to tensor<4xui8>
// CHECK-NEXT:    func.return %[[C]]
func.func @abs_pinned(%x: tensor<4xui8>) -> tensor<4xui8> {
  %a = fuel.abs %x {fuel.pin = #fuel.device<"cpu">} : tensor<4xui8>
  func.return %a : tensor<4xui8>
}

// A device outside the topology has no candidate backend: left for the planner to report.
// CHECK-LABEL: func.func @abs_pinned_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4xui8>)
// CHECK-NEXT:    %[[A:.*]] = fuel.abs %[[X]] {fuel.pin = #fuel.device<"cuda:7">} : tensor<4xui8>
// CHECK-NEXT:    func.return %[[A]]
func.func @abs_pinned_not_applied(%x: tensor<4xui8>) -> tensor<4xui8> {
  %a = fuel.abs %x {fuel.pin = #fuel.device<"cuda:7">} : tensor<4xui8>
  func.return %a : tensor<4xui8>
}

// matmul@i8 is unserved and matmul@i32 exists, but cast(matmul@i32) back to i8 is not
// proven exact (the rule only trusts movement, neg/abs/relu/max/min and compares).
// CHECK-LABEL: func.func @matmul_i8_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4x4xi8>)
// CHECK-NEXT:    %[[A:.*]] = fuel.matmul %[[X]], %[[X]] : tensor<4x4xi8>, tensor<4x4xi8> -> tensor<4x4xi8>
// CHECK-NEXT:    func.return %[[A]]
func.func @matmul_i8_not_applied(%x: tensor<4x4xi8>) -> tensor<4x4xi8> {
  %a = fuel.matmul %x, %x : tensor<4x4xi8>, tensor<4x4xi8> -> tensor<4x4xi8>
  func.return %a : tensor<4x4xi8>
}
