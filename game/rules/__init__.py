"""The game's rules: what a query shows and rules out (assess), the score, the debrief, the board a player sees
(hypotheses), and what a player may see of the library."""
