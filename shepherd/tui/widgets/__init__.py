"""Widgets of the dashboard: the virtual runs table, the status header, the log view, the script view."""
