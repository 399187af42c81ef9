// RUN: fuel-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not fuel-opt %S/Inputs/wrong-expectations.mlir --split-input-file --verify-diagnostics 2>&1 | filecheck %s --check-prefix=WRONG

// `expected-error` designators are checked as mlir-opt checks them: every chunk's error must
// be expected on its line, every expectation met; then fuel-opt exits 0 and prints the chunks
// that had no error.
// CHECK-LABEL: func.func @fine
// CHECK-NOT:   func.func

// expected-error @+2 {{expects a float element type for operand, got i32}}
func.func @offset(%x: tensor<4xi32>) {
  %0 = "fuel.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  func.return
}

// -----
func.func @same_line(%x: tensor<4xi1>) {
  %0 = "fuel.neg"(%x) : (tensor<4xi1>) -> tensor<4xi1> // expected-error {{does not accept i1 operands}}
  func.return
}

// -----
func.func @below(%x: tensor<4xf32>) {
  // expected-error @below {{expected from variable 'T', but got tensor<4xf16>}}
  %0 = "fuel.sigmoid"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  func.return
}

// -----
func.func @parse_error_above(%x: tensor<4xf32>) {
  %0 = fuel.exp %x tensor<4xf32>
  // expected-error @above {{Expected ':'}}
  func.return
}

// -----
func.func @fine(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// WRONG:      error: 4 diagnostic expectation(s) not met:
// WRONG-NEXT: wrong-expectations.mlir:4: unexpected error: 'fuel.exp' expects a float element type for operand, got i32
// WRONG-NEXT: wrong-expectations.mlir:2: expected error "expects a float element type" was not produced
// WRONG-NEXT: wrong-expectations.mlir:11: unexpected error: 'fuel.neg' does not accept i1 operands
// WRONG-NEXT: wrong-expectations.mlir:9: expected error "does not accept i32" was not produced
// WRONG-NOT:  wrong-expectations.mlir
