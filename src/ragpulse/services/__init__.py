"""The service layer: library functions that the CLI and the HTTP API share (no logic only in one of them)."""
