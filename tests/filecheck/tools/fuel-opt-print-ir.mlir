// RUN: fuel-opt %s -p fuel-optimize --print-ir-after-all -o %t 2>&1 | filecheck %s
// RUN: fuel-opt %s -p cse --print-ir-after-all -o %t 2>&1 | filecheck %s --check-prefix=PASS
// RUN: fuel-opt - < %s | filecheck %s --check-prefix=STDIN

// `--print-ir-after-all` shows the IR after each of fuel-optimize's stages (the pass it runs in
// in parentheses; `topology` changes no IR and prints none), then after the pass itself.
// CHECK:      IR Dump After fuel-fix-dtypes (fuel-optimize)
// CHECK:      IR Dump After fuel-canonicalize (fuel-optimize)
// CHECK:      IR Dump After plan (fuel-optimize)
// CHECK:      IR Dump After fuel-fork-placements (fuel-optimize)
// CHECK:      IR Dump After fuel-converge-frontier (fuel-optimize)
// CHECK:      IR Dump After fuel-emit-decode-flash (fuel-optimize)
// CHECK:      IR Dump After fuel-converge-frontier (fuel-optimize)
// CHECK:      IR Dump After fuel-fuse-patterns (fuel-optimize)
// CHECK:      IR Dump After fuel-converge-frontier (fuel-optimize)
// CHECK:      IR Dump After picked (fuel-optimize)
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @chain
// CHECK:        fuel.exp {{.*}}fuel.kernel = #fuel.kernel<"exp"
// CHECK:      IR Dump After fuel-bake-variants (fuel-optimize)
// CHECK:      IR Dump After copies (fuel-optimize)
// CHECK:      IR Dump After fuel-fix-layouts (fuel-optimize)
// CHECK:      IR Dump After fuel-optimize //
// CHECK-NOT:  IR Dump

// A pass without stages dumps once.
// PASS:      IR Dump After cse //
// PASS-NOT:  IR Dump

// `-` reads the input from stdin.
// STDIN-LABEL: func.func @chain
// STDIN-NEXT:    fuel.exp

func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = fuel.exp %x : tensor<4x8xf32>
  %r = fuel.relu %e : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
