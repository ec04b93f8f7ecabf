"""The package's version, at the bottom layer, where records and headers read it.

It lives here so no module imports the package itself (imports run one way, down).
"""

__version__ = "0.1.0"
