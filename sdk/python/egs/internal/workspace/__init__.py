"""Internal modules of the EGS SDK: not part of the public API."""
