"""What the terminal UI needs from the layers below game, in one place (the TUI presents game only):
loading an incident file as a variant, and building or finding its database."""

from __future__ import annotations

from incidents.loader import IncidentError, find_incident, load_incident
from telemetry_gen.cache import BuildInfo, ensure_database

__all__ = ["BuildInfo", "IncidentError", "ensure_database", "find_incident", "load_incident"]
