"""The query sandbox: the SQL worker process and its limits, the gateway the game talks to, and the policy that
decides which statements a player may run."""
