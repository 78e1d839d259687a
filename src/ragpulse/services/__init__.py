"""Library services under the CLI and the HTTP API: each CLI command and API route is a thin adapter over
these functions."""
