"""integrations layer."""
