"""Clients for every external service; each takes its base URL from settings."""
