"""Checklist judges: business judges declared in configuration (rules and rubric items)."""
