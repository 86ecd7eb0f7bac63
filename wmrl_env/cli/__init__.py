"""The ``wmrl`` command line: thin front ends over the library's own functions."""
