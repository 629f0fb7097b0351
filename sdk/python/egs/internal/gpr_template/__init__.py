"""GPR templates and template bindings: data classes."""
