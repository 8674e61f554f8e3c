"""Numbered schema migrations (NNN_name.sql), shipped as package data and applied by store.migrations."""
