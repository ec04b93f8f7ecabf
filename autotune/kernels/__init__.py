"""Kernel families and their declarations: expressions, the declaration schema, launch plans,
device limits, spaces and their enumeration, rendering, cached space sizes, SASS statistics."""
