"""The library's version: the daemon's (src/common/version.h), as the library is released with it."""

__version__ = "0.1.0"
