// Input of fuel-optimize.mlir's BUDGET runs: ops pinned to cuda:0, every tensor 1 KiB.
func.func @evict_idle(%x: tensor<256xf32>) -> tensor<256xf32> {
  %a = fuel.exp %x {fuel.pin = #fuel.device<"cuda:0">} : tensor<256xf32>
  %b = fuel.tanh %a {fuel.pin = #fuel.device<"cuda:0">} : tensor<256xf32>
  %c = fuel.neg %b {fuel.pin = #fuel.device<"cuda:0">} : tensor<256xf32>
  %d = fuel.add %b, %c {fuel.pin = #fuel.device<"cuda:0">} : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  %e = fuel.add %a, %d {fuel.pin = #fuel.device<"cuda:0">} : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
  func.return %e : tensor<256xf32>
}

func.func @evict_idle_not_applied(%x: tensor<256xf32>) -> tensor<256xf32> {
  %a = fuel.exp %x {fuel.pin = #fuel.device<"cuda:0">} : tensor<256xf32>
  %b = fuel.tanh %a {fuel.pin = #fuel.device<"cuda:0">} : tensor<256xf32>
  func.return %b : tensor<256xf32>
}
