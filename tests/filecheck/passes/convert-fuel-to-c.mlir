// RUN: fuel-opt %s -p convert-fuel-to-c | filecheck %s
// RUN: fuel-opt %s -p convert-fuel-to-c,convert-fuel-to-c | filecheck %s
// RUN: fuel-opt %s -p 'convert-fuel-to-c{min_ops=1}' | filecheck %s --check-prefix=ONE
// RUN: fuel-opt %s -p 'convert-fuel-to-c{cost_model=false}' | filecheck %s --check-prefix=ALL

// One generated kernel per distinct fusion group, at the top of the module, with its source
// and, as its body, the ops it was generated from (splat constants first).
// CHECK:      fuel.c_kernel @c_fused_0 space = [4, 8] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> source = "{{.*}}static void c_fused_0_body(const float *restrict in0, const float *restrict in1, float *restrict out0) {{.*}}float v2 = (float)exp((double)v0);  /* fuel.exp */{{.*}}v2 + v1;  /* fuel.add */{{.*}}void c_fused_0(void **args) {{.*}}"
// CHECK-NEXT:   ^bb0(%[[IN0:.*]]: tensor<4x8xf32>, %[[IN1:.*]]: tensor<8xf32>):
// CHECK-NEXT:     %[[E:.*]] = fuel.exp %[[IN0]] : tensor<4x8xf32>
// CHECK-NEXT:     %[[A:.*]] = fuel.add %[[E]], %[[IN1]] : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:     %[[R:.*]] = fuel.relu %[[A]] : tensor<4x8xf32>
// CHECK-NEXT:     fuel.yield %[[R]] : tensor<4x8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: fuel.c_kernel @c_fused_1 space = [4, 8] : (tensor<4x8xi32>) -> (tensor<4x8xi32>, tensor<4x8xi1>) source = "{{.*}}const int32_t v1 = ((int32_t)3);  /* splat */{{.*}}(int32_t)((uint32_t)v0 * (uint32_t)v1){{.*}}"
// CHECK-NEXT:   ^bb0(%[[IN:.*]]: tensor<4x8xi32>):
// CHECK-NEXT:     %[[K:.*]] = fuel.constant dense<3> : tensor<i32>
// CHECK-NEXT:     %[[M:.*]] = fuel.mul %[[IN]], %[[K]] : tensor<4x8xi32>, tensor<i32> -> tensor<4x8xi32>
// CHECK-NEXT:     %[[C:.*]] = fuel.gt %[[M]], %[[IN]] : tensor<4x8xi32>, tensor<4x8xi32> -> tensor<4x8xi1>
// CHECK-NEXT:     fuel.yield %[[M]], %[[C]] : tensor<4x8xi32>, tensor<4x8xi1>
// CHECK-NEXT:   }
// CHECK:      fuel.c_kernel @c_fused_2 space = [8] : (tensor<8xf16>, tensor<8xbf16>) -> tensor<8xf16> source = "{{.*}}const uint16_t *restrict in0{{.*}}"
// CHECK:      fuel.c_kernel @c_fused_3 space = [8] : (tensor<8xf64>) -> (tensor<8xf64>, tensor<8xf64>)
// CHECK-NOT:  fuel.c_kernel

// With min_ops=1 a lone op converts too.
// ONE-LABEL: func.func @lone_op_not_applied
// ONE-NEXT:    fuel.c_launch

// Without the cost model, a large transcendental chain converts too.
// ALL-LABEL: func.func @large_exp_chain_not_applied
// ALL-NEXT:    fuel.c_launch

// An elementwise chain fuses into one kernel launch.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = fuel.c_launch @c_fused_0(%[[X]], %[[B]]) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = fuel.exp %x : tensor<4x8xf32>
  %a = fuel.add %e, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %r = fuel.relu %a : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// An integer chain with a splat (inlined, then erased) and two outputs.
// CHECK-LABEL: func.func @int_chain
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xi32>)
// CHECK-NEXT:    %[[Y:.*]], %[[C:.*]] = fuel.c_launch @c_fused_1(%[[X]]) : (tensor<4x8xi32>) -> (tensor<4x8xi32>, tensor<4x8xi1>)
// CHECK-NEXT:    func.return %[[Y]], %[[C]]
func.func @int_chain(%x: tensor<4x8xi32>) -> (tensor<4x8xi32>, tensor<4x8xi1>) {
  %k = fuel.constant dense<3> : tensor<i32>
  %m = fuel.mul %x, %k : tensor<4x8xi32>, tensor<i32> -> tensor<4x8xi32>
  %c = fuel.gt %m, %x : tensor<4x8xi32>, tensor<4x8xi32> -> tensor<4x8xi1>
  func.return %m, %c : tensor<4x8xi32>, tensor<4x8xi1>
}

// A lone op stays a library kernel.
// CHECK-LABEL: func.func @lone_op_not_applied
// CHECK-NEXT:    fuel.exp
func.func @lone_op_not_applied(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = fuel.exp %x : tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}

// f16 sigmoid and pow (numpy rounds a few inputs differently), gelu, device-placed ops and
// ops stamped with another kernel source stay.
// CHECK-LABEL: func.func @chain_not_applied
// CHECK-NEXT:    fuel.sigmoid
// CHECK-NEXT:    fuel.pow
// CHECK-NEXT:    fuel.gelu
// CHECK-NEXT:    fuel.tanh
// CHECK-NEXT:    fuel.exp
// CHECK-NEXT:    fuel.exp
// CHECK-NEXT:    fuel.exp
func.func @chain_not_applied(%h: tensor<8xf16>, %x: tensor<8xf32>) -> (tensor<8xf16>, tensor<8xf32>) {
  %n = fuel.sigmoid %h : tensor<8xf16>
  %a = fuel.pow %n, %h : tensor<8xf16>, tensor<8xf16> -> tensor<8xf16>
  %g = fuel.gelu %x : tensor<8xf32>
  %t = fuel.tanh %g {fuel.device = #fuel.device<"cuda:0">} : tensor<8xf32>
  %e = fuel.exp %t {fuel.kernel = #fuel.kernel<"exp", [f32, f32], "cpu", "fast", "00000000000000aa">} : tensor<8xf32>
  %f = fuel.exp %e {fuel.kernel = #fuel.kernel<"exp", [f32, f32], "cpu", "fast", "00000000000000aa">} : tensor<8xf32>
  %y = fuel.exp %f {fuel.kernel = #fuel.kernel<"exp", [f32, f32], "cpu", "fast", "00000000000000aa">} : tensor<8xf32>
  func.return %a, %y : tensor<8xf16>, tensor<8xf32>
}

// The cost model: libm's scalar exp on 1M elements costs more than the numpy calls it saves.
// CHECK-LABEL: func.func @large_exp_chain_not_applied
// CHECK-NEXT:    fuel.exp
// CHECK-NEXT:    fuel.exp
func.func @large_exp_chain_not_applied(%x: tensor<1048576xf32>) -> tensor<1048576xf32> {
  %a = fuel.exp %x : tensor<1048576xf32>
  %b = fuel.exp %a : tensor<1048576xf32>
  func.return %b : tensor<1048576xf32>
}

// f16 and bf16: 16-bit storage computed in f32, rounded after every op (numpy's way).
// CHECK-LABEL: func.func @half_chain
// CHECK-NEXT:    fuel.c_launch @c_fused_2
// CHECK-NEXT:    func.return
func.func @half_chain(%h: tensor<8xf16>, %b: tensor<8xbf16>) -> tensor<8xf16> {
  %n = fuel.neg %h : tensor<8xf16>
  %c = fuel.cast %b : tensor<8xbf16> to tensor<8xf16>
  %a = fuel.add %n, %c : tensor<8xf16>, tensor<8xf16> -> tensor<8xf16>
  func.return %a : tensor<8xf16>
}

// Two groups split by an op left on numpy (f64 gelu_tanh has no C form), the second reading
// the first's result: it reads the first launch's result.
// ONE-LABEL: func.func @group_feeds_group
// ONE-NEXT:    %[[A:.*]], %[[P:.*]] = fuel.c_launch @{{.*}}(%{{.*}}) : (tensor<8xf64>) -> (tensor<8xf64>, tensor<8xf64>)
// ONE-NEXT:    %[[G:.*]] = fuel.gelu %[[A]] tanh
// ONE-NEXT:    %[[M:.*]] = fuel.c_launch @{{.*}}(%[[G]], %[[P]])
// ONE-NEXT:    func.return %[[M]]
func.func @group_feeds_group(%x: tensor<8xf64>) -> tensor<8xf64> {
  %a = fuel.abs %x : tensor<8xf64>
  %g = fuel.gelu %a tanh : tensor<8xf64>
  %one = fuel.constant dense<1.0> : tensor<f64>
  %p = fuel.add %x, %one : tensor<8xf64>, tensor<f64> -> tensor<8xf64>
  %m = fuel.mul %g, %p : tensor<8xf64>, tensor<8xf64> -> tensor<8xf64>
  func.return %m : tensor<8xf64>
}

// Generated C bakes its loop bounds: a chain with a `?` dim keeps library kernels (a run's
// specialisation to its shape generates the C: lowering/cpu/specialize.py).
// CHECK-LABEL: func.func @dynamic_chain_not_applied
// CHECK-NEXT:    fuel.exp
// CHECK-NEXT:    fuel.add
// CHECK-NEXT:    fuel.relu
func.func @dynamic_chain_not_applied(%x: tensor<?x8xf32> {fuel.dim_names = ["seq"]}, %b: tensor<8xf32>) -> tensor<?x8xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 64>}} {
  %e = fuel.exp %x : tensor<?x8xf32>
  %a = fuel.add %e, %b : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  %r = fuel.relu %a : tensor<?x8xf32>
  func.return %r : tensor<?x8xf32>
}
