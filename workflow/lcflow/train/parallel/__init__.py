"""The processes of a data-parallel job: who each is, what they exchange, whether the backend can start."""
