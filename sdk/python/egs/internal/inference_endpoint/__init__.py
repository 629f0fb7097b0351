"""Inference endpoints: request data classes of the public EGS SDK."""
