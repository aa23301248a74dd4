"""The ``lightmem`` command line."""
