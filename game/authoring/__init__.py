"""Authoring incidents: the symptom families `servedrill new` starts from."""
