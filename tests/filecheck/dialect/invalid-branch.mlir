// RUN: fuel-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// CHECK: 'fuel.branch' kind must be one of variant, placement, got 'maybe'
func.func @bad_kind(%x: tensor<4xf32>) {
  %r = fuel.branch maybe -> tensor<4xf32> arm {
    fuel.yield %x : tensor<4xf32>
  }
  func.return
}

// -----
// CHECK: 'fuel.branch' needs at least one arm
func.func @no_arms(%x: tensor<4xf32>) {
  %r = "fuel.branch"() <{kind = "variant", gates = []}> : () -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.branch' has 1 arms but 2 gates
func.func @gate_count(%x: tensor<4xf32>) {
  %r = "fuel.branch"() <{kind = "variant", gates = ["", ""]}> ({
    "fuel.yield"(%x) : (tensor<4xf32>) -> ()
  }) : () -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.branch' arm 0 is the reference and cannot be gated
func.func @gated_reference(%x: tensor<4xf32>) {
  %r = fuel.branch variant (%x : tensor<4xf32>) -> tensor<4xf32> arm if "dim($0, 0) == 4" {
    fuel.yield %x : tensor<4xf32>
  }
  func.return
}

// -----
// CHECK: 'fuel.branch' arm 0 must end with fuel.yield
func.func @no_yield(%x: tensor<4xf32>) {
  %r = "fuel.branch"() <{kind = "variant", gates = [""]}> ({}) : () -> tensor<4xf32>
  func.return
}

// -----
// CHECK: 'fuel.branch' arm 1 yields (tensor<4xf16>) but the branch results are (tensor<4xf32>)
func.func @yield_types(%x: tensor<4xf32>, %h: tensor<4xf16>) {
  %r = fuel.branch variant -> tensor<4xf32> arm {
    fuel.yield %x : tensor<4xf32>
  } arm {
    fuel.yield %h : tensor<4xf16>
  }
  func.return
}

// -----
// CHECK: 'fuel.branch' arm 1: bad gate term 'seq_q == 1' (expected dim($i, axis) or value($i) compared with an integer)
func.func @bad_gate(%x: tensor<4xf32>) {
  %r = fuel.branch variant (%x : tensor<4xf32>) -> tensor<4xf32> arm {
    fuel.yield %x : tensor<4xf32>
  } arm if "seq_q == 1" {
    fuel.yield %x : tensor<4xf32>
  }
  func.return
}

// -----
// CHECK: 'fuel.branch' arm 1 gate reads $3 but the branch has 1 gate operands
func.func @gate_operand_out_of_range(%x: tensor<4xf32>) {
  %r = fuel.branch variant (%x : tensor<4xf32>) -> tensor<4xf32> arm {
    fuel.yield %x : tensor<4xf32>
  } arm if "dim($3, 0) == 4" {
    fuel.yield %x : tensor<4xf32>
  }
  func.return
}


// -----
// CHECK: 'fuel.yield' expects parent op to be one of 'fuel.branch', 'fuel.c_kernel', 'fuel.triton_kernel'
func.func @yield_outside_a_branch(%x: tensor<4xf32>) -> tensor<4xf32> {
  fuel.yield %x : tensor<4xf32>
}
