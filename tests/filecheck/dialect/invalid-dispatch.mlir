// RUN: fuel-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// CHECK: invalid device 'gpu0' (expected "cpu" or "<backend>:<n>")
func.func @copy_to_bad_device(%x: tensor<4xf32>) {
  %0 = "fuel.copy"(%x) <{target = "gpu0"}> : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: candidate revision 'xyz' is not hexadecimal
func.func @candidate_bad_revision(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {a = #fuel.candidate<"numpy", backend "cpu", device "cpu", rev "xyz", l1 = 1.0, judge = none, xfer = 0.0, verdict "kept">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: invalid device 'host' (expected "cpu" or "<backend>:<n>")
func.func @candidate_bad_device(%x: tensor<4xf32>) {
  %0 = "fuel.neg"(%x) {a = #fuel.candidate<"numpy", backend "cpu", device "host", rev "00", l1 = 1.0, judge = none, xfer = 0.0, verdict "kept">} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: operand is used with type tensor<4xf16>, but has been previously used or defined with type tensor<4xf32>
func.func @copy_changes_type(%x: tensor<4xf32>) {
  %0 = fuel.copy %x to "cpu" : tensor<4xf16>
  func.return
}
