"""The package's version, in a module of its own so that the command line can say it without importing the
whole package (`python -m transformer --version`)."""
__version__ = "0.1.0"
