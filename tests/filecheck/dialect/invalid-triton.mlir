// RUN: fuel-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// CHECK: 'fuel.triton_kernel' block must be a power of two in 1..65536, got 1000
"fuel.triton_kernel"() <{sym_name = "k", space = array<i64: 4>, block = 1000 : i64, function_type = (tensor<4xf32>) -> tensor<4xf32>, source = "def k(x): pass"}> : () -> ()

// -----
// CHECK: 'fuel.triton_kernel' space dims must be >= 0, got [-4]
"fuel.triton_kernel"() <{sym_name = "k", space = array<i64: -4>, block = 1024 : i64, function_type = (tensor<4xf32>) -> tensor<4xf32>, source = "def k(x): pass"}> : () -> ()

// -----
// CHECK: 'fuel.triton_kernel' needs at least one result
"fuel.triton_kernel"() <{sym_name = "k", space = array<i64: 4>, block = 1024 : i64, function_type = (tensor<4xf32>) -> (), source = "def k(x): pass"}> : () -> ()

// -----
// CHECK: 'fuel.triton_kernel' signature types must be static fuel tensors, got tensor<4xi16>
"fuel.triton_kernel"() <{sym_name = "k", space = array<i64: 4>, block = 1024 : i64, function_type = (tensor<4xi16>) -> tensor<4xf32>, source = "def k(x): pass"}> : () -> ()

// -----
// CHECK: 'fuel.triton_kernel' operand tensor<3xf32> does not broadcast into space [4]
"fuel.triton_kernel"() <{sym_name = "k", space = array<i64: 4>, block = 1024 : i64, function_type = (tensor<3xf32>) -> tensor<4xf32>, source = "def k(x): pass"}> : () -> ()

// -----
// CHECK: 'fuel.triton_kernel' source does not define the kernel 'def k('
"fuel.triton_kernel"() <{sym_name = "k", space = array<i64: 4>, block = 1024 : i64, function_type = (tensor<4xf32>) -> tensor<4xf32>, source = "def other(x): pass"}> : () -> ()

// -----
// CHECK: 'fuel.triton_launch' '@f' is not a fuel.triton_kernel
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "fuel.triton_launch"(%x) <{kernel = @f}> : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----
// CHECK: 'fuel.triton_launch' types (tensor<4xf16>) -> tensor<4xf32> differ from kernel @k: (tensor<4xf32>) -> tensor<4xf32>
"fuel.triton_kernel"() <{sym_name = "k", space = array<i64: 4>, block = 1024 : i64, function_type = (tensor<4xf32>) -> tensor<4xf32>, source = "def k(x): pass"}> : () -> ()
func.func @g(%x: tensor<4xf16>) {
  %0 = "fuel.triton_launch"(%x) <{kernel = @k}> : (tensor<4xf16>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.library_call' callee 'MatMul' is not a lower-case identifier
func.func @h(%x: tensor<4xf32>) {
  %0 = "fuel.library_call"(%x) <{callee = "MatMul", dtypes = [f32, f32], backend = "cuda"}> : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.library_call' key dtypes: unsupported element type i16
func.func @h(%x: tensor<4xf32>) {
  %0 = "fuel.library_call"(%x) <{callee = "neg", dtypes = [i16, f32], backend = "cuda"}> : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.library_call' needs at least one result
func.func @h(%x: tensor<4xf32>) {
  "fuel.library_call"(%x) <{callee = "neg", dtypes = [f32, f32], backend = "cuda"}> : (tensor<4xf32>) -> ()
  func.return
}
