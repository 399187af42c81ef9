"""What runs a bundle, without the compiler: the binding table (`binding_table`), dispatch
facts (`compiled`), costs, precision, kernel contracts and ledgers (`contracts`), the kernel
libraries (`kernels.cpu`, `kernels.triton`, `native`), the loaders of generated code
(`loaders`), topology, Judge, devices, the executor and the bundle loader (`bundle`).

Imports only `fuel_dialect` of fuel (checked by import-linter, `make lint`).
"""
