// RUN: fuel-opt %s -p 'fuel-place{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none"},fuel-emit-dim-branches{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none"}' | filecheck %s
// RUN: fuel-opt %s -p 'fuel-place{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none"},fuel-emit-dim-branches{topology="%S/../../../examples/topologies/cpu_2gpu.toml" judge="none" placements=false}' | filecheck %s --check-prefix=NOPLACE

// At the hint (64 rows) the product is worth the copies to cuda:0; at seq = 1 the host's
// kernel wins: a branch, arm 0 the plan's kernel, arm 1 the host's gated on the rows up to
// the crossover, picked (a run below it takes arm 1).
// CHECK-LABEL: func.func @rows_branch
// CHECK-SAME:    (%[[X:.*]]: tensor<?x1024xf32>
// CHECK-NEXT:    %[[W:.*]] = fuel.weight "w"
// CHECK-NEXT:    %[[B:.*]] = fuel.branch placement (%[[X]] : tensor<?x1024xf32>) -> tensor<?x1024xf32> arm {
// CHECK-NEXT:      %[[G:.*]] = fuel.matmul %[[X]], %[[W]] {fuel.device = #fuel.device<"cuda:0">
// CHECK-NEXT:      fuel.yield %[[G]]
// CHECK-NEXT:    } arm if "dim($0, 0) <= {{[0-9]+}}" {
// CHECK-NEXT:      %[[C:.*]] = fuel.matmul %[[X]], %[[W]] {fuel.device = #fuel.device<"cpu">, {{.*}}fuel.kernel = #fuel.kernel<"matmul", [f32, f32, f32], "cpu"
// CHECK-NEXT:      fuel.yield %[[C]]
// CHECK-NEXT:    } {fuel.picked = 1 : i64}
// CHECK-NEXT:    func.return %[[B]]
// NOPLACE-LABEL: func.func @rows_branch
// NOPLACE-NEXT:    fuel.weight
// NOPLACE-NEXT:    fuel.matmul
func.func @rows_branch(%x: tensor<?x1024xf32> {fuel.dim_names = ["seq"]}) -> tensor<?x1024xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 4096>}} {
  %w = fuel.weight "w" : tensor<1024x1024xf32>
  %y = fuel.matmul %x, %w : tensor<?x1024xf32>, tensor<1024x1024xf32> -> tensor<?x1024xf32>
  func.return %y : tensor<?x1024xf32>
}

// One winner across the range (a small product stays on the host), and an op whose `?` dims
// are two symbols (no single dim to gate on): left alone.
// CHECK-LABEL: func.func @rows_branch_not_applied
// CHECK-NEXT:    %{{.*}} = fuel.weight "w"
// CHECK-NEXT:    %{{.*}} = fuel.matmul
// CHECK-NEXT:    %{{.*}} = fuel.add
// CHECK-NEXT:    func.return
func.func @rows_branch_not_applied(%x: tensor<?x8xf32> {fuel.dim_names = ["seq"]}, %y: tensor<?x?xf32> {fuel.dim_names = ["rows", "cols"]}) -> tensor<?x?xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 4096>, rows = #fuel.dim<1, 4096>, cols = #fuel.dim<1, 4096>}} {
  %w = fuel.weight "w" : tensor<8x8xf32>
  %m = fuel.matmul %x, %w : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %a = fuel.add %y, %y : tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?x?xf32>
  func.return %a : tensor<?x?xf32>
}
