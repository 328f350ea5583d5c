"""Game days and interviews: the plan of rounds, the facilitator's console, collecting results, and the
interviewer's (game master's) channel into a session."""
