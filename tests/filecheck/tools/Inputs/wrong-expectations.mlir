// Read by ../verify-diagnostics.mlir: each chunk expects wrongly.
// expected-error @+3 {{expects a float element type}}
func.func @wrong_line(%x: tensor<4xi32>) {
  %0 = "fuel.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  func.return
}

// -----
// expected-error @+1 {{does not accept i32}}
func.func @wrong_text(%x: tensor<4xi1>) {
  %0 = "fuel.neg"(%x) : (tensor<4xi1>) -> tensor<4xi1>
  func.return
}
