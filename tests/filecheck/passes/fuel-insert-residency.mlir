// RUN: fuel-opt %s -p 'fuel-insert-residency{budget="cuda:0=3KiB" device="cuda:0"}' | filecheck %s
// RUN: not fuel-opt %s -p 'fuel-insert-residency{budget="cuda:0=3KiB" device="cuda:0" rounds=1}' 2>&1 | filecheck %s --check-prefix=LIMIT
// RUN: not fuel-opt %s -p 'fuel-insert-residency{budget="cuda:0=1.5KiB" device="cuda:0"}' 2>&1 | filecheck %s --check-prefix=UNREACHABLE
// RUN: not fuel-opt %s -p 'fuel-insert-residency{budget="cuda:0=3 parsecs"}' 2>&1 | filecheck %s --check-prefix=BADSIZE

// Every tensor is 1 KiB. %a is idle from its definition to %f: one eviction fits 3 KiB.
// CHECK-LABEL: func.func @evict_once
// CHECK-NEXT:    %[[A:.*]] = fuel.exp %{{.*}}
// CHECK-NEXT:    %[[B:.*]] = fuel.tanh %[[A]]
// CHECK-NEXT:    %[[H:.*]] = fuel.copy %[[A]] to "cpu" {fuel.residency = "evict"}
// CHECK-NEXT:    %[[C:.*]] = fuel.neg %[[B]]
// CHECK-NEXT:    %[[D:.*]] = fuel.add %[[B]], %[[C]]
// CHECK-NEXT:    %[[R:.*]] = fuel.copy %[[H]] to "cuda:0" {fuel.residency = "reload"}
// CHECK-NEXT:    %{{.*}} = fuel.add %[[R]], %[[D]]
// LIMIT: error: residency: a budget is unreachable
// UNREACHABLE: error: residency: a budget is unreachable
// UNREACHABLE: @evict_once on cuda:0: budget 1.5 KiB; peak 4 KiB at fuel.add %d -> 3 KiB at fuel.add %d; DOES NOT FIT (nothing live at fuel.add %d is idle across it)
// BADSIZE: bad memory size '3 parsecs': write a number and a unit
func.func @evict_once(%x: tensor<256xf32>) -> tensor<256xf32> {
  %a = fuel.exp %x : tensor<256xf32>
  %b = fuel.tanh %a : tensor<256xf32>
  %c = fuel.neg %b : tensor<256xf32>
  %d = fuel.add %b, %c : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  %e = fuel.add %a, %d : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  func.return %e : tensor<256xf32>
}

// Peak 5 KiB at %e with %a and %b idle across it: two rounds, the longer gap (%a) first.
// CHECK-LABEL: func.func @multi_round
// CHECK-NEXT:    %[[A:.*]] = fuel.exp %{{.*}}
// CHECK-NEXT:    %[[HA:.*]] = fuel.copy %[[A]] to "cpu" {fuel.residency = "evict"}
// CHECK-NEXT:    %[[B:.*]] = fuel.tanh %{{.*}}
// CHECK-NEXT:    %[[C:.*]] = fuel.neg %[[B]]
// CHECK-NEXT:    %[[HB:.*]] = fuel.copy %[[B]] to "cpu" {fuel.residency = "evict"}
// CHECK-NEXT:    %[[D:.*]] = fuel.abs %[[C]]
// CHECK-NEXT:    %[[E:.*]] = fuel.add %[[C]], %[[D]]
// CHECK-NEXT:    %[[RA:.*]] = fuel.copy %[[HA]] to "cuda:0" {fuel.residency = "reload"}
// CHECK-NEXT:    %[[F:.*]] = fuel.add %[[RA]], %[[E]]
// CHECK-NEXT:    %[[RB:.*]] = fuel.copy %[[HB]] to "cuda:0" {fuel.residency = "reload"}
// CHECK-NEXT:    %{{.*}} = fuel.add %[[RB]], %[[F]]
// LIMIT: @multi_round on cuda:0: budget 3 KiB; peak 5 KiB at fuel.add %e -> 4 KiB at fuel.add %e; DOES NOT FIT (the round limit (1) ran out)
// LIMIT-NEXT: 1 eviction(s) in 1 round(s), transfers 60.3 us
// LIMIT-NEXT: evict %a (fuel.exp), 1 KiB, to cpu after fuel.exp %a (30.1 us); reload before fuel.add %f (30.1 us)
func.func @multi_round(%x: tensor<256xf32>) -> tensor<256xf32> {
  %a = fuel.exp %x : tensor<256xf32>
  %b = fuel.tanh %x : tensor<256xf32>
  %c = fuel.neg %b : tensor<256xf32>
  %d = fuel.abs %c : tensor<256xf32>
  %e = fuel.add %c, %d : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  %f = fuel.add %a, %e : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  %g = fuel.add %b, %f : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  func.return %g : tensor<256xf32>
}

// Peak 3 KiB already fits: nothing inserted.
// CHECK-LABEL: func.func @evict_once_not_applied
// CHECK-NEXT:    %[[A:.*]] = fuel.exp %{{.*}}
// CHECK-NEXT:    %[[B:.*]] = fuel.tanh %[[A]]
// CHECK-NEXT:    %{{.*}} = fuel.add %[[A]], %[[B]]
// CHECK-NEXT:    func.return
func.func @evict_once_not_applied(%x: tensor<256xf32>) -> tensor<256xf32> {
  %a = fuel.exp %x : tensor<256xf32>
  %b = fuel.tanh %a : tensor<256xf32>
  %c = fuel.add %a, %b : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  func.return %c : tensor<256xf32>
}

// Over 3 KiB, but on cuda:1, which has no budget: nothing inserted.
// CHECK-LABEL: func.func @multi_round_not_applied
// CHECK-NEXT:    %[[A:.*]] = fuel.exp %{{.*}}
// CHECK-NEXT:    %[[B:.*]] = fuel.tanh %[[A]]
// CHECK-NEXT:    %[[C:.*]] = fuel.neg %[[B]]
// CHECK-NEXT:    %[[D:.*]] = fuel.add %[[B]], %[[C]]
// CHECK-NEXT:    %{{.*}} = fuel.add %[[A]], %[[D]]
func.func @multi_round_not_applied(%x: tensor<256xf32>) -> tensor<256xf32> {
  %a = fuel.exp %x {fuel.device = #fuel.device<"cuda:1">} : tensor<256xf32>
  %b = fuel.tanh %a {fuel.device = #fuel.device<"cuda:1">} : tensor<256xf32>
  %c = fuel.neg %b {fuel.device = #fuel.device<"cuda:1">} : tensor<256xf32>
  %d = fuel.add %b, %c {fuel.device = #fuel.device<"cuda:1">} : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  %e = fuel.add %a, %d {fuel.device = #fuel.device<"cuda:1">} : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  func.return %e : tensor<256xf32>
}
