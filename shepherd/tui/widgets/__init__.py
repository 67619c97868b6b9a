"""Widgets of the dashboard: the virtual runs table (and its columns), the log view, the header, the script view."""
