"""servedrill: engine_model."""
