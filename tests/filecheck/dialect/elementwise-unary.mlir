// RUN: fuel-opt %s | filecheck %s
// RUN: fuel-opt %s --print-op-generic | fuel-opt | filecheck %s

// Float-only unary math, chained so each op reads the previous result.
// CHECK-LABEL: func.func @unary_float
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[A:.*]] = fuel.exp %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[B:.*]] = fuel.log %[[A]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[C:.*]] = fuel.sqrt %[[B]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[D:.*]] = fuel.rsqrt %[[C]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[E:.*]] = fuel.recip %[[D]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[F:.*]] = fuel.tanh %[[E]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[G:.*]] = fuel.sigmoid %[[F]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[H:.*]] = fuel.silu %[[G]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[I:.*]] = fuel.sin %[[H]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[J:.*]] = fuel.cos %[[I]] : tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[J]] : tensor<4x8xf32>
func.func @unary_float(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = fuel.exp %x : tensor<4x8xf32>
  %1 = fuel.log %0 : tensor<4x8xf32>
  %2 = fuel.sqrt %1 : tensor<4x8xf32>
  %3 = fuel.rsqrt %2 : tensor<4x8xf32>
  %4 = fuel.recip %3 : tensor<4x8xf32>
  %5 = fuel.tanh %4 : tensor<4x8xf32>
  %6 = fuel.sigmoid %5 : tensor<4x8xf32>
  %7 = fuel.silu %6 : tensor<4x8xf32>
  %8 = fuel.sin %7 : tensor<4x8xf32>
  %9 = fuel.cos %8 : tensor<4x8xf32>
  func.return %9 : tensor<4x8xf32>
}

// The other float widths, and a 0-d tensor.
// CHECK-LABEL: func.func @unary_float_widths
// CHECK-SAME:    (%[[H:.*]]: tensor<3xf16>, %[[B:.*]]: tensor<2x3xbf16>, %[[D:.*]]: tensor<f64>)
// CHECK-NEXT:    %{{.*}} = fuel.exp %[[H]] : tensor<3xf16>
// CHECK-NEXT:    %{{.*}} = fuel.silu %[[B]] : tensor<2x3xbf16>
// CHECK-NEXT:    %[[R:.*]] = fuel.rsqrt %[[D]] : tensor<f64>
// CHECK-NEXT:    func.return %[[R]] : tensor<f64>
func.func @unary_float_widths(%h: tensor<3xf16>, %b: tensor<2x3xbf16>, %d: tensor<f64>) -> tensor<f64> {
  %0 = fuel.exp %h : tensor<3xf16>
  %1 = fuel.silu %b : tensor<2x3xbf16>
  %2 = fuel.rsqrt %d : tensor<f64>
  func.return %2 : tensor<f64>
}

// `tanh` selects the tanh approximation; without it GELU is the exact erf form.
// CHECK-LABEL: func.func @gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<2x16xbf16>)
// CHECK-NEXT:    %[[A:.*]] = fuel.gelu %[[X]] : tensor<2x16xbf16>
// CHECK-NEXT:    %[[B:.*]] = fuel.gelu %[[A]] tanh : tensor<2x16xbf16>
// CHECK-NEXT:    %[[C:.*]] = fuel.gelu %[[B]] tanh {fuel.device = #fuel.device<"cpu">} : tensor<2x16xbf16>
// CHECK-NEXT:    func.return %[[C]] : tensor<2x16xbf16>
func.func @gelu(%x: tensor<2x16xbf16>) -> tensor<2x16xbf16> {
  %0 = fuel.gelu %x : tensor<2x16xbf16>
  %1 = fuel.gelu %0 tanh : tensor<2x16xbf16>
  %2 = fuel.gelu %1 tanh {fuel.device = #fuel.device<"cpu">} : tensor<2x16xbf16>
  func.return %2 : tensor<2x16xbf16>
}

// neg, abs and relu also take signed and unsigned integers.
// CHECK-LABEL: func.func @unary_any_number
// CHECK-SAME:    (%[[I:.*]]: tensor<5xi32>, %[[J:.*]]: tensor<5xi64>, %[[K:.*]]: tensor<2x2xi8>, %[[U:.*]]: tensor<7xui8>, %[[F:.*]]: tensor<5xf16>)
// CHECK-NEXT:    %{{.*}} = fuel.neg %[[I]] : tensor<5xi32>
// CHECK-NEXT:    %{{.*}} = fuel.abs %[[J]] : tensor<5xi64>
// CHECK-NEXT:    %{{.*}} = fuel.relu %[[K]] : tensor<2x2xi8>
// CHECK-NEXT:    %{{.*}} = fuel.relu %[[U]] : tensor<7xui8>
// CHECK-NEXT:    %[[A:.*]] = fuel.abs %[[F]] : tensor<5xf16>
// CHECK-NEXT:    %[[N:.*]] = fuel.neg %[[A]] : tensor<5xf16>
// CHECK-NEXT:    %[[R:.*]] = fuel.relu %[[N]] : tensor<5xf16>
// CHECK-NEXT:    func.return %[[R]] : tensor<5xf16>
func.func @unary_any_number(%i: tensor<5xi32>, %j: tensor<5xi64>, %k: tensor<2x2xi8>, %u: tensor<7xui8>, %f: tensor<5xf16>) -> tensor<5xf16> {
  %0 = fuel.neg %i : tensor<5xi32>
  %1 = fuel.abs %j : tensor<5xi64>
  %2 = fuel.relu %k : tensor<2x2xi8>
  %3 = fuel.relu %u : tensor<7xui8>
  %4 = fuel.abs %f : tensor<5xf16>
  %5 = fuel.neg %4 : tensor<5xf16>
  %6 = fuel.relu %5 : tensor<5xf16>
  func.return %6 : tensor<5xf16>
}

// cast keeps the shape and changes the element type: float widths, float <-> int, to/from i1.
// CHECK-LABEL: func.func @cast
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4xf32>, %[[N:.*]]: tensor<3xi64>)
// CHECK-NEXT:    %[[A:.*]] = fuel.cast %[[X]] : tensor<2x4xf32> to tensor<2x4xf16>
// CHECK-NEXT:    %[[B:.*]] = fuel.cast %[[A]] : tensor<2x4xf16> to tensor<2x4xbf16>
// CHECK-NEXT:    %[[C:.*]] = fuel.cast %[[B]] : tensor<2x4xbf16> to tensor<2x4xui8>
// CHECK-NEXT:    %[[D:.*]] = fuel.cast %[[C]] : tensor<2x4xui8> to tensor<2x4xi1>
// CHECK-NEXT:    %[[E:.*]] = fuel.cast %[[D]] : tensor<2x4xi1> to tensor<2x4xf32>
// CHECK-NEXT:    %{{.*}} = fuel.cast %[[N]] : tensor<3xi64> to tensor<3xf64>
// CHECK-NEXT:    %{{.*}} = fuel.cast %[[N]] : tensor<3xi64> to tensor<3xi8>
// CHECK-NEXT:    %{{.*}} = fuel.cast %[[X]] : tensor<2x4xf32> to tensor<2x4xi32>
// CHECK-NEXT:    func.return %[[E]] : tensor<2x4xf32>
func.func @cast(%x: tensor<2x4xf32>, %n: tensor<3xi64>) -> tensor<2x4xf32> {
  %0 = fuel.cast %x : tensor<2x4xf32> to tensor<2x4xf16>
  %1 = fuel.cast %0 : tensor<2x4xf16> to tensor<2x4xbf16>
  %2 = fuel.cast %1 : tensor<2x4xbf16> to tensor<2x4xui8>
  %3 = fuel.cast %2 : tensor<2x4xui8> to tensor<2x4xi1>
  %4 = fuel.cast %3 : tensor<2x4xi1> to tensor<2x4xf32>
  %5 = fuel.cast %n : tensor<3xi64> to tensor<3xf64>
  %6 = fuel.cast %n : tensor<3xi64> to tensor<3xi8>
  %7 = fuel.cast %x : tensor<2x4xf32> to tensor<2x4xi32>
  func.return %4 : tensor<2x4xf32>
}
