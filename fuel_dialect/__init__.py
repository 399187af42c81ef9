"""The fuel dialect: element types, `#fuel.*` attributes and `fuel.*` ops (no torch/triton)."""

from fuel_dialect.dialect import OPS, Fuel, fuel_context

__all__ = ["OPS", "Fuel", "fuel_context"]
