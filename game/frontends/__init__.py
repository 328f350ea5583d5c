"""Ways to play that are not the terminal app: line mode (stdin/stdout) and scripted players (autoplay)."""
