// RUN: fuel-opt %s -p 'fuel-place{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none"}' | filecheck %s --check-prefix=DEFAULT
// RUN: fuel-opt %s -p 'fuel-place{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none" hint="seq=1"}' | filecheck %s --check-prefix=SHORT
// RUN: not fuel-opt %s -p 'fuel-place{hint="len=8"}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not fuel-opt %s -p 'fuel-place{hint="seq=0"}' 2>&1 | filecheck %s --check-prefix=BAD

// A `?` dim is priced at its symbol's hint, clamped to the symbol's range: 64 by default (a
// 64x1024 product is worth the copies to a GPU: cuda:0), `hint="seq=1"` prices one row (the
// copies cost more than they save: cpu).
// DEFAULT-LABEL: func.func @hinted_matmul
// DEFAULT-NEXT:    %[[W:.*]] = fuel.weight "w"
// DEFAULT-NEXT:    %{{.*}} = fuel.matmul %{{.*}}, %[[W]] {fuel.device = #fuel.device<"cuda:0">
// SHORT-LABEL:   func.func @hinted_matmul
// SHORT-NEXT:      %[[W:.*]] = fuel.weight "w"
// SHORT-NEXT:      %{{.*}} = fuel.matmul %{{.*}}, %[[W]] {fuel.device = #fuel.device<"cpu">
func.func @hinted_matmul(%x: tensor<?x1024xf32> {fuel.dim_names = ["seq"]}) -> tensor<?x1024xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 4096>}} {
  %w = fuel.weight "w" : tensor<1024x1024xf32>
  %y = fuel.matmul %x, %w : tensor<?x1024xf32>, tensor<1024x1024xf32> -> tensor<?x1024xf32>
  func.return %y : tensor<?x1024xf32>
}

// The default hint clamped to a range of [1, 2]: two rows, cpu.
// DEFAULT-LABEL: func.func @clamped_matmul
// DEFAULT-NEXT:    %[[W:.*]] = fuel.weight "w"
// DEFAULT-NEXT:    %{{.*}} = fuel.matmul %{{.*}}, %[[W]] {fuel.device = #fuel.device<"cpu">
func.func @clamped_matmul(%x: tensor<?x1024xf32> {fuel.dim_names = ["seq"]}) -> tensor<?x1024xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 2>}} {
  %w = fuel.weight "w" : tensor<1024x1024xf32>
  %y = fuel.matmul %x, %w : tensor<?x1024xf32>, tensor<1024x1024xf32> -> tensor<?x1024xf32>
  func.return %y : tensor<?x1024xf32>
}

// Static shapes are priced as they are, whatever the hints say.
// SHORT-LABEL:   func.func @hinted_matmul_not_applied
// SHORT-NEXT:      %[[W:.*]] = fuel.weight "w"
// SHORT-NEXT:      %{{.*}} = fuel.matmul %{{.*}}, %[[W]] {fuel.device = #fuel.device<"cuda:0">
func.func @hinted_matmul_not_applied(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %w = fuel.weight "w" : tensor<1024x1024xf32>
  %y = fuel.matmul %x, %w : tensor<64x1024xf32>, tensor<1024x1024xf32> -> tensor<64x1024xf32>
  func.return %y : tensor<64x1024xf32>
}

// UNKNOWN: hint for undeclared dim symbol(s) len (declared: seq)
// BAD: bad hint 'seq=0' (expected NAME=SIZE, SIZE a positive integer)
