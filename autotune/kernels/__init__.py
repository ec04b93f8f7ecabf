"""Kernel families and their declarations: a config's source, launch and validity."""
