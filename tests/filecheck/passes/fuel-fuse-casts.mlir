// RUN: fuel-opt %s -p 'fuel-fuse-casts{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none"}' | filecheck %s
// RUN: fuel-opt %s -p 'fuel-fuse-casts{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none" allow_semantic_change=true}' | filecheck %s --check-prefix=SEM
// RUN: fuel-opt %s -p 'fuel-fuse-casts{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none" elide_round_trips="all"}' | filecheck %s --check-prefix=ALL

// f16 -> f32 -> f16 is the identity: the round trip goes, the consumer reads %x.
// CHECK-LABEL: func.func @round_trip
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf16>)
// CHECK-NEXT:    %[[N:.*]] = fuel.neg %[[X]] : tensor<4xf16>
// CHECK-NEXT:    func.return %[[N]]
func.func @round_trip(%x: tensor<4xf16>) -> tensor<4xf16> {
  %a = fuel.cast %x : tensor<4xf16> to tensor<4xf32>
  %b = fuel.cast %a : tensor<4xf32> to tensor<4xf16>
  %c = fuel.neg %b : tensor<4xf16>
  func.return %c : tensor<4xf16>
}

// f32 -> f16 -> f32 rounds: kept by default, removed only under elide_round_trips="all".
// CHECK-LABEL: func.func @round_trip_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.cast %[[X]] : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT:    %[[B:.*]] = fuel.cast %[[A]] : tensor<4xf16> to tensor<4xf32>
// CHECK-NEXT:    func.return %[[B]]
// ALL-LABEL:   func.func @round_trip_not_applied
// ALL-SAME:      (%[[X:.*]]: tensor<4xf32>)
// ALL-NEXT:      func.return %[[X]]
func.func @round_trip_not_applied(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = fuel.cast %x : tensor<4xf32> to tensor<4xf16>
  %b = fuel.cast %a : tensor<4xf16> to tensor<4xf32>
  func.return %b : tensor<4xf32>
}

// A chain that widens at every step (i8 -> i32 -> f64 -> i8), and i1 through anything.
// CHECK-LABEL: func.func @round_trip_chain
// CHECK-SAME:    (%[[X:.*]]: tensor<4xi8>, %[[P:.*]]: tensor<4xi1>)
// CHECK-NEXT:    func.return %[[X]], %[[P]]
func.func @round_trip_chain(%x: tensor<4xi8>, %p: tensor<4xi1>) -> (tensor<4xi8>, tensor<4xi1>) {
  %a = fuel.cast %x : tensor<4xi8> to tensor<4xi32>
  %b = fuel.cast %a : tensor<4xi32> to tensor<4xf64>
  %c = fuel.cast %b : tensor<4xf64> to tensor<4xi8>
  %d = fuel.cast %p : tensor<4xi1> to tensor<4xbf16>
  %e = fuel.cast %d : tensor<4xbf16> to tensor<4xi1>
  func.return %c, %e : tensor<4xi8>, tensor<4xi1>
}

// float -> int -> float truncates: kept; a cast with another user stays for that user.
// CHECK-LABEL: func.func @round_trip_chain_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.cast %[[X]] : tensor<4xf32> to tensor<4xi32>
// CHECK-NEXT:    %[[B:.*]] = fuel.cast %[[A]] : tensor<4xi32> to tensor<4xf32>
// CHECK-NEXT:    func.return %[[B]], %[[A]]
func.func @round_trip_chain_not_applied(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %a = fuel.cast %x : tensor<4xf32> to tensor<4xi32>
  %b = fuel.cast %a : tensor<4xi32> to tensor<4xf32>
  func.return %b, %a : tensor<4xf32>, tensor<4xi32>
}

// neg commutes with rounding: an f32 island around it in an f16 graph folds away exactly.
// CHECK-LABEL: func.func @exact_consumer
// CHECK-SAME:    (%[[X:.*]]: tensor<64x64xf16>)
// CHECK-NEXT:    %[[N:.*]] = fuel.neg %[[X]] : tensor<64x64xf16>
// CHECK-NEXT:    func.return %[[N]]
func.func @exact_consumer(%x: tensor<64x64xf16>) -> tensor<64x64xf16> {
  %a = fuel.cast %x : tensor<64x64xf16> to tensor<64x64xf32>
  %b = fuel.neg %a : tensor<64x64xf32>
  %c = fuel.cast %b : tensor<64x64xf32> to tensor<64x64xf16>
  func.return %c : tensor<64x64xf16>
}

// exp@f16 rounds differently from exp@f32: kept unless allow_semantic_change.
// CHECK-LABEL: func.func @exact_consumer_not_applied
// CHECK-SAME:    (%[[X:.*]]: tensor<64x64xf16>)
// CHECK-NEXT:    %[[A:.*]] = fuel.cast %[[X]] : tensor<64x64xf16> to tensor<64x64xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.exp %[[A]] : tensor<64x64xf32>
// CHECK-NEXT:    %[[C:.*]] = fuel.cast %[[B]] : tensor<64x64xf32> to tensor<64x64xf16>
// CHECK-NEXT:    func.return %[[C]]
// SEM-LABEL:   func.func @exact_consumer_not_applied
// SEM-SAME:      (%[[X:.*]]: tensor<64x64xf16>)
// SEM-NEXT:      %[[E:.*]] = fuel.exp %[[X]] : tensor<64x64xf16>
// SEM-NEXT:      func.return %[[E]]
func.func @exact_consumer_not_applied(%x: tensor<64x64xf16>) -> tensor<64x64xf16> {
  %a = fuel.cast %x : tensor<64x64xf16> to tensor<64x64xf32>
  %b = fuel.exp %a : tensor<64x64xf32>
  %c = fuel.cast %b : tensor<64x64xf32> to tensor<64x64xf16>
  func.return %c : tensor<64x64xf16>
}

// A widening cast before a compare: compare the f16 values directly (no back-cast: i1 out).
// CHECK-LABEL: func.func @compare
// CHECK-SAME:    (%[[X:.*]]: tensor<8xf16>, %[[Y:.*]]: tensor<8xf16>)
// CHECK-NEXT:    %[[L:.*]] = fuel.lt %[[X]], %[[Y]] : tensor<8xf16>, tensor<8xf16> -> tensor<8xi1>
// CHECK-NEXT:    func.return %[[L]]
func.func @compare(%x: tensor<8xf16>, %y: tensor<8xf16>) -> tensor<8xi1> {
  %a = fuel.cast %x : tensor<8xf16> to tensor<8xf32>
  %b = fuel.cast %y : tensor<8xf16> to tensor<8xf32>
  %c = fuel.lt %a, %b : tensor<8xf32>, tensor<8xf32> -> tensor<8xi1>
  func.return %c : tensor<8xi1>
}

// Narrowing can merge values (x < y but both round to one f16): kept by default.
// CHECK-LABEL: func.func @compare_not_applied
// CHECK-NEXT:    fuel.cast
// CHECK-NEXT:    fuel.cast
// CHECK-NEXT:    fuel.lt {{.*}} : tensor<8xf16>, tensor<8xf16> -> tensor<8xi1>
func.func @compare_not_applied(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xi1> {
  %a = fuel.cast %x : tensor<8xf32> to tensor<8xf16>
  %b = fuel.cast %y : tensor<8xf32> to tensor<8xf16>
  %c = fuel.lt %a, %b : tensor<8xf16>, tensor<8xf16> -> tensor<8xi1>
  func.return %c : tensor<8xi1>
}

// Coverage is the op's own candidate backends: pinned to cuda:0, whose Triton elementwise
// kernels are float-only, relu@i8 has no kernel there, so the f32 island stays though the cpu
// has one.
// CHECK-LABEL: func.func @pinned
// CHECK-NEXT:    %[[C:.*]] = fuel.relu %{{.*}} {fuel.pin = #fuel.device<"cpu">} : tensor<64x64xi8>
// CHECK-NEXT:    func.return %[[C]]
// CHECK-LABEL: func.func @pinned_not_applied
// CHECK-NEXT:    %[[A:.*]] = fuel.cast
// CHECK-NEXT:    %[[B:.*]] = fuel.relu %[[A]] {fuel.pin = #fuel.device<"cuda:0">} : tensor<64x64xf32>
func.func @pinned(%x: tensor<64x64xi8>) -> tensor<64x64xi8> {
  %a = fuel.cast %x : tensor<64x64xi8> to tensor<64x64xf32>
  %b = fuel.relu %a {fuel.pin = #fuel.device<"cpu">} : tensor<64x64xf32>
  %c = fuel.cast %b : tensor<64x64xf32> to tensor<64x64xi8>
  func.return %c : tensor<64x64xi8>
}
func.func @pinned_not_applied(%x: tensor<64x64xi8>) -> tensor<64x64xi8> {
  %a = fuel.cast %x : tensor<64x64xi8> to tensor<64x64xf32>
  %b = fuel.relu %a {fuel.pin = #fuel.device<"cuda:0">} : tensor<64x64xf32>
  %c = fuel.cast %b : tensor<64x64xf32> to tensor<64x64xi8>
  func.return %c : tensor<64x64xi8>
}

// sqrt has no i32 kernel: even with semantic change allowed the f32 cast stays.
// SEM-LABEL: func.func @no_kernel_not_applied
// SEM-NEXT:    %[[A:.*]] = fuel.cast
// SEM-NEXT:    %[[B:.*]] = fuel.sqrt %[[A]] : tensor<4xf32>
func.func @no_kernel_not_applied(%x: tensor<4xi32>) -> tensor<4xf32> {
  %a = fuel.cast %x : tensor<4xi32> to tensor<4xf32>
  %b = fuel.sqrt %a : tensor<4xf32>
  func.return %b : tensor<4xf32>
}

// Native f16 beats "f32 kernel + casts" by cost: with users left for a back-cast, the f16
// exp stays (compare @exact_consumer_not_applied, where both casts die and SEM rewrites).
// SEM-LABEL: func.func @cost_not_applied
// SEM-NEXT:    %[[A:.*]] = fuel.cast
// SEM-NEXT:    %[[B:.*]] = fuel.exp %[[A]] : tensor<256x256xf16>
// SEM-NEXT:    %[[C:.*]] = fuel.neg %[[B]] : tensor<256x256xf16>
func.func @cost_not_applied(%x: tensor<256x256xf32>) -> tensor<256x256xf16> {
  %a = fuel.cast %x : tensor<256x256xf32> to tensor<256x256xf16>
  %b = fuel.exp %a : tensor<256x256xf16>
  %c = fuel.neg %b : tensor<256x256xf16>
  func.return %c : tensor<256x256xf16>
}
