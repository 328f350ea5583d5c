"""servedrill: tui/widgets."""
