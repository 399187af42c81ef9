// RUN: rm -rf %t.dir && fuel-opt %s -t fuel-bundle -o %t.dir && ls %t.dir | filecheck %s --check-prefix=DIR
// RUN: fuel-opt %s -t fuel-bundle -o %t.fuelbundle && python -m zipfile -l %t.fuelbundle | filecheck %s --check-prefix=ARCHIVE
// RUN: fuel-opt - -t fuel-bundle < %s > %t.piped.fuelbundle && python -m zipfile -l %t.piped.fuelbundle | filecheck %s --check-prefix=ARCHIVE
// RUN: not fuel-opt %s -t 'fuel-bundle{target=sm_1}' -o %t.bad 2>&1 | filecheck %s --check-prefix=BAD

// `-t fuel-bundle` writes `fuel compile`'s bundle: a directory, or an archive by its suffix
// or on a pipe (never on a terminal); pytest runs them (tests/tools/test_fuel_opt_cli.py).
// DIR:      manifest.json
// DIR-NEXT: module.mlir
// DIR-NEXT: picker.json

// ARCHIVE:      manifest.json
// ARCHIVE-NEXT: module.mlir
// ARCHIVE-NEXT: picker.json

// BAD: error: -t fuel-bundle: {{.*}}'sm_1'

func.func @main(%x: tensor<4x8xf32> {fuel.name = "x"}) -> (tensor<4x8xf32> {fuel.name = "y"}) {
  %e = fuel.exp %x : tensor<4x8xf32>
  %r = fuel.relu %e : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
