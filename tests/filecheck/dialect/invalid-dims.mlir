// RUN: fuel-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// CHECK: invalid dim range [0, 8] (expected 1 <= lo <= hi)
func.func @range_from_zero(%x: tensor<?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<0, 8>}} {
  func.return
}

// -----
// CHECK: invalid dim range [9, 8] (expected 1 <= lo <= hi)
func.func @range_reversed(%x: tensor<?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<9, 8>}} {
  func.return
}

// -----
// CHECK: 'func.func' @unnamed argument 0 (tensor<?x?xf32>) has 2 dynamic dim(s) but fuel.dim_names names 1
func.func @unnamed(%x: tensor<?x?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  func.return
}

// -----
// CHECK: 'func.func' @undeclared argument 0 names dim 'seq', which fuel.dims does not declare (declared: n)
func.func @undeclared(%x: tensor<?xf32> {fuel.dim_names = ["seq"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  func.return
}

// -----
// CHECK: 'func.func' @unbound declares dim 'm' but no argument dim names it
func.func @unbound(%x: tensor<?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {m = #fuel.dim<1, 4>, n = #fuel.dim<1, 8>}} {
  func.return
}

// -----
// CHECK: 'func.func' @not_a_range dim 'n' must be a #fuel.dim<lo, hi> range, got 8 : i64
func.func @not_a_range(%x: tensor<?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = 8}} {
  func.return
}

// -----
// CHECK: 'func.func' @bad_name invalid dim name 'Seq' (expected [a-z_][a-z0-9_]*)
func.func @bad_name(%x: tensor<?xf32> {fuel.dim_names = ["Seq"]}) attributes {fuel.dims = {Seq = #fuel.dim<1, 8>}} {
  func.return
}

// -----
// CHECK: 'fuel.matmul' contraction dims differ: lhs ?x8 has k=8, rhs 9x4 has k=9
func.func @static_mismatch_still_caught(%x: tensor<?x8xf32> {fuel.dim_names = ["n"]}, %w: tensor<9x4xf32>) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = "fuel.matmul"(%x, %w) : (tensor<?x8xf32>, tensor<9x4xf32>) -> tensor<?x4xf32>
  func.return
}

// -----
// CHECK: 'func.func' @dims_not_a_dict fuel.dims must be a dictionary of #fuel.dim ranges
func.func @dims_not_a_dict(%x: tensor<4xf32>) attributes {fuel.dims = [1, 2]} {
  func.return
}

// -----
// CHECK: 'func.func' @names_not_strings argument 0 fuel.dim_names must be an array of names
func.func @names_not_strings(%x: tensor<?xf32> {fuel.dim_names = [1]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  func.return
}

// -----
// CHECK: 'fuel.iota' shape has 2 dims, the result 1
func.func @iota_rank(%x: tensor<?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = "fuel.iota"() <{shape = [1, "n"], start = "0", step = 1.0 : f64, axis = 0 : i64}> : () -> tensor<?xi64>
  func.return
}

// -----
// CHECK: 'fuel.iota' dim 0 is the expression 'n': its type dim is ?
func.func @iota_expr_static(%x: tensor<?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = "fuel.iota"() <{shape = ["n"], start = "0", step = 1.0 : f64, axis = 0 : i64}> : () -> tensor<4xi64>
  func.return
}

// -----
// CHECK: 'fuel.iota' dim 0 is 3, its type dim 4
func.func @iota_static_mismatch() {
  %0 = "fuel.iota"() <{shape = [3], start = "0", step = 1.0 : f64, axis = 0 : i64}> : () -> tensor<4xi64>
  func.return
}

// -----
// CHECK: 'fuel.iota' axis 1 is out of range for rank 1
func.func @iota_axis(%x: tensor<?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = "fuel.iota"() <{shape = ["n"], start = "0", step = 1.0 : f64, axis = 1 : i64}> : () -> tensor<?xi64>
  func.return
}

// -----
// CHECK: 'fuel.iota' invalid dim expression '2*(n'
func.func @iota_bad_expr(%x: tensor<?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = "fuel.iota"() <{shape = ["2*(n"], start = "0", step = 1.0 : f64, axis = 0 : i64}> : () -> tensor<?xi64>
  func.return
}

// -----
// CHECK: 'func.func' @iota_undeclared 'fuel.iota' uses dim 'm', which it does not declare
func.func @iota_undeclared(%x: tensor<?xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = "fuel.iota"() <{shape = ["m"], start = "0", step = 1.0 : f64, axis = 0 : i64}> : () -> tensor<?xi64>
  func.return
}

// -----
// CHECK: 'fuel.reshape' dims has 2 entries for a rank-3 result
func.func @reshape_dims_rank(%x: tensor<?x4xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = fuel.reshape %x {dims = ["n", 4]} : tensor<?x4xf32> -> tensor<?x1x4xf32>
  func.return
}

// -----
// CHECK: 'fuel.reshape' dims[1] = 2, the result dim is 1
func.func @reshape_dims_static(%x: tensor<?x4xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = fuel.reshape %x {dims = ["n", 2, 4]} : tensor<?x4xf32> -> tensor<?x1x4xf32>
  func.return
}

// -----
// CHECK: 'fuel.reshape' invalid dim expression 'n*'
func.func @reshape_dims_expr(%x: tensor<?x4xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = fuel.reshape %x {dims = ["n*", 1, 4]} : tensor<?x4xf32> -> tensor<?x1x4xf32>
  func.return
}

// -----
// CHECK: 'func.func' @reshape_undeclared 'fuel.reshape' uses dim 'm', which it does not declare
func.func @reshape_undeclared(%x: tensor<?x4xf32> {fuel.dim_names = ["n"]}) attributes {fuel.dims = {n = #fuel.dim<1, 8>}} {
  %0 = fuel.reshape %x {dims = ["m", 1, 4]} : tensor<?x4xf32> -> tensor<?x1x4xf32>
  func.return
}
