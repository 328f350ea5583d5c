"""The engine's fidelity harness: published and measured serving points replayed through the simulator."""
