"""The package's version, at the bottom layer: what records and headers stamp is read from here,
so no module imports the package itself (imports run one way, down)."""

__version__ = "0.1.0"
