// RUN: fuel-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// CHECK: 'fuel.c_kernel' space dims must be >= 0, got [-4]
"fuel.c_kernel"() <{sym_name = "k", space = array<i64: -4>, function_type = (tensor<4xf32>) -> tensor<4xf32>, source = "void k(void **args) {}"}> : () -> ()

// -----
// CHECK: 'fuel.c_kernel' needs at least one result
"fuel.c_kernel"() <{sym_name = "k", space = array<i64: 4>, function_type = (tensor<4xf32>) -> (), source = "void k(void **args) {}"}> : () -> ()

// -----
// CHECK: 'fuel.c_kernel' signature types must be static tensors of f64, f32, f16, bf16, i64, i32, i8, u8, i1, got tensor<?xf32>
"fuel.c_kernel"() <{sym_name = "k", space = array<i64: 4>, function_type = (tensor<?xf32>) -> tensor<4xf32>, source = "void k(void **args) {}"}> : () -> ()

// -----
// CHECK: 'fuel.c_kernel' operand tensor<3xf32> does not broadcast into space [4]
"fuel.c_kernel"() <{sym_name = "k", space = array<i64: 4>, function_type = (tensor<3xf32>) -> tensor<4xf32>, source = "void k(void **args) {}"}> : () -> ()

// -----
// CHECK: 'fuel.c_kernel' source does not define 'void k(void **args)'
"fuel.c_kernel"() <{sym_name = "k", space = array<i64: 4>, function_type = (tensor<4xf32>) -> tensor<4xf32>, source = "void other(void **args) {}"}> : () -> ()

// -----
// CHECK: 'fuel.c_launch' '@f' is not a fuel.c_kernel
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "fuel.c_launch"(%x) <{kernel = @f}> : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----
// CHECK: 'fuel.c_launch' types (tensor<4xf64>) -> tensor<4xf32> differ from kernel @k: (tensor<4xf32>) -> tensor<4xf32>
"fuel.c_kernel"() <{sym_name = "k", space = array<i64: 4>, function_type = (tensor<4xf32>) -> tensor<4xf32>, source = "void k(void **args) {}"}> : () -> ()
func.func @g(%x: tensor<4xf64>) {
  %0 = "fuel.c_launch"(%x) <{kernel = @k}> : (tensor<4xf64>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.c_kernel' body must have one block, got 2
fuel.c_kernel @k space = [4] : (tensor<4xf32>) -> tensor<4xf32> source = "void k(void **args) {}" {
^bb0(%x: tensor<4xf32>):
  fuel.yield %x : tensor<4xf32>
^bb1(%y: tensor<4xf32>):
  fuel.yield %y : tensor<4xf32>
}

// -----
// CHECK: 'fuel.c_kernel' body arguments must be the kernel's input types
fuel.c_kernel @k space = [4] : (tensor<4xf32>) -> tensor<4xf32> source = "void k(void **args) {}" {
^bb0(%x: tensor<4xf16>):
  %n = fuel.neg %x : tensor<4xf16>
  fuel.yield %n : tensor<4xf16>
}

// -----
// CHECK: 'func.return' expects parent op 'func.func'
fuel.c_kernel @k space = [4] : (tensor<4xf32>) -> tensor<4xf32> source = "void k(void **args) {}" {
^bb0(%x: tensor<4xf32>):
  func.return %x : tensor<4xf32>
}

// -----
// CHECK: 'fuel.c_kernel' body must end in fuel.yield of the kernel's output types
fuel.c_kernel @k space = [4] : (tensor<4xf32>) -> tensor<4xf32> source = "void k(void **args) {}" {
^bb0(%x: tensor<4xf32>):
  %c = fuel.cast %x : tensor<4xf32> to tensor<4xf16>
  fuel.yield %c : tensor<4xf16>
}

// -----
// CHECK: 'fuel.c_kernel' body op 'fuel.neg' reads a value defined outside the kernel
func.func @f(%y: tensor<4xf32>) -> tensor<4xf32> {
  fuel.c_kernel @k space = [4] : (tensor<4xf32>) -> tensor<4xf32> source = "void k(void **args) {}" {
  ^bb0(%x: tensor<4xf32>):
    %n = fuel.neg %y : tensor<4xf32>
    fuel.yield %n : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}
