"""servedrill: game."""
