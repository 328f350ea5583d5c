"""Reports written from sessions: the leaderboard, the interview report, and the text and chart helpers they
share."""
